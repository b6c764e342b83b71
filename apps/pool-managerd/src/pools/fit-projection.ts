import type { PoolConfig } from '@llama-orch/contracts';
import {
  buildEngineFlags,
  projectMemory as runFitParams,
  type MemoryProjection as ToolProjection,
} from '@llama-orch/engine-provisioner';
import {
  FIT_ENGINE_BASE_BYTES,
  projectMemory as projectByFormula,
  type MemoryProjection,
  type ModelMemoryFacts,
} from './memory-projection.js';

/**
 * Arguments of llama-server that change what a load takes and that `llama-fit-params` takes too
 * (common/arg.cpp of the bundled tree: options without `set_examples`, shared by every tool), each
 * with whether it takes a value. Anything else the engine gets is left out: the server-only flags
 * (`--metrics`, `--no-webui`, `--embeddings`, `--reranking`, `--pooling`, `--no-cont-batching`,
 * `-kvu`) make the tool exit 1, and the rest (`-t`, sampling, `--alias`…) do not change memory.
 */
export const FIT_FLAGS: ReadonlyMap<string, boolean> = new Map([
  ['-b', true],
  ['--batch-size', true],
  ['-ub', true],
  ['--ubatch-size', true],
  ['-fa', true],
  ['--flash-attn', true],
  ['-ctk', true],
  ['--cache-type-k', true],
  ['-ctv', true],
  ['--cache-type-v', true],
  ['-kvo', false],
  ['--kv-offload', false],
  ['-nkvo', false],
  ['--no-kv-offload', false],
  ['--swa-full', false],
  ['--repack', false],
  ['-nr', false],
  ['--no-repack', false],
  ['--no-host', false],
  ['-ngl', true],
  ['--gpu-layers', true],
  ['--n-gpu-layers', true],
  ['-sm', true],
  ['--split-mode', true],
  ['-ts', true],
  ['--tensor-split', true],
  ['-mg', true],
  ['--main-gpu', true],
  ['-dev', true],
  ['--device', true],
  ['-ot', true],
  ['--override-tensor', true],
  ['-cmoe', false],
  ['--cpu-moe', false],
  ['-ncmoe', true],
  ['--n-cpu-moe', true],
  ['--override-kv', true],
]);

/** Given to the tool by `projectMemory` itself (`-m`, `-c`, `-np`), or the server's bind address. */
const OWN_FLAGS = new Set(['-m', '--host', '--port', '-c', '-np']);

/** llama.cpp's defaults (common/common.h `n_batch`, `n_ubatch`). */
const DEFAULT_BATCH = 2048;
const DEFAULT_UBATCH = 512;
const CTX_PAD = 256;

/** What {@link fitParamsArgs} derives from a pool's engine flags. */
export interface FitParamsArgs {
  /** Arguments after `-m -c -np` for `llama-fit-params` (the engine's memory-relevant ones, in order). */
  extraArgs: string[];
  /** Logical and physical batch the engine runs with (`-b`, `-ub`: the last one given, else llama.cpp's default). */
  batch: number;
  ubatch: number;
}

/**
 * The `llama-fit-params` arguments of `pool`'s engine (pure): its argv as engine-flags builds it
 * (the batch flags of embedding and reranking pools, GPU layers, `extra_flags`), keeping only
 * {@link FIT_FLAGS}. An inline `--flag=value` is passed as two arguments. Throws what
 * `buildEngineFlags` throws for a bad config (the engine could not start either).
 */
export function fitParamsArgs(pool: PoolConfig): FitParamsArgs {
  const argv = buildEngineFlags({ pool, modelPath: '-', port: 1 });
  const extraArgs: string[] = [];
  let batch = DEFAULT_BATCH;
  let ubatch = DEFAULT_UBATCH;
  const isValue = (t: string | undefined): t is string => t !== undefined && (!t.startsWith('-') || /^-\d/.test(t));
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] as string;
    const eq = token.startsWith('--') ? token.indexOf('=') : -1;
    const name = eq > 0 ? token.slice(0, eq) : token;
    const takesValue = FIT_FLAGS.get(name);
    if (OWN_FLAGS.has(name) || takesValue === undefined) {
      // Not for the tool: skip the flag and the value that follows it, if any.
      if (eq < 0 && isValue(argv[i + 1])) i++;
      continue;
    }
    if (!takesValue) {
      extraArgs.push(name);
      continue;
    }
    const value = eq > 0 ? token.slice(eq + 1) : argv[++i];
    if (value === undefined) break;
    extraArgs.push(name, value);
    if (name === '-b' || name === '--batch-size') batch = Number(value);
    if (name === '-ub' || name === '--ubatch-size') ubatch = Number(value);
  }
  return { extraArgs, batch, ubatch };
}

const MiB = 1024 * 1024;

/**
 * Our projection from the tool's table (pure). The host row's model and context terms are taken as
 * they are. The compute term is the tool's, except where llama-server reserves less than the tool:
 *
 * - Logits of a whole micro-batch (generation pools only). The tool reserves its compute graph with
 *   an output row per token of the micro-batch (`n_outputs_max` = `n_batch`, llama-context.cpp
 *   `sched_reserve`), llama-server with one per slot (`server_output_limits` in
 *   tools/server/server-context.cpp sets `n_outputs_max` = slots; embeddings and reranking keep
 *   `n_batch`). The difference, `(n_tokens − slots) × n_vocab × 4` bytes, is 62 MiB on a 32k
 *   vocabulary at the default `-ub 512`: the tool printed 62–66 MiB of compute for the measured
 *   generation pools where llama-server logged 2–26 MiB. Whether those logits are the graph's peak
 *   (then the server's buffer is the tool's minus them) or one layer's activations are (then the two
 *   are equal) is not in the table, so the compute term is the formula's figure (fitted to the
 *   server's logged buffers) held within those two bounds, the tool's figure when the header lacks
 *   the hyperparameters.
 *
 * Then what the tool does not count at all:
 * - output: the logits/embeddings buffer llama.cpp keeps on the host (`n_vocab × 4` per output row:
 *   one per slot when generating, the whole batch for embeddings and reranking; measured: a 982-token
 *   embedding request took an engine from 47 to 291 MiB resident), the formula's term.
 * - engine: llama-server without a model plus what the tool's whole-MiB figures round off,
 *   {@link FIT_ENGINE_BASE_BYTES}, measured.
 *
 * Devices keep the tool's figures (their compute a ceiling, by the logits above when the output
 * layer is offloaded); `total_bytes` is the host's share, what the node's budget counts.
 */
export function fromFitParams(
  tool: ToolProjection,
  facts: ModelMemoryFacts | { file_bytes: number },
  pool: PoolConfig,
  args: Pick<FitParamsArgs, 'batch' | 'ubatch'>,
): MemoryProjection {
  const formula = projectByFormula(facts, pool);
  const slots = pool.determinism ? 1 : pool.slots;
  const nCtx = Math.ceil(pool.ctx / CTX_PAD) * CTX_PAD;
  const nTokens = Math.min(nCtx, Math.min(args.batch, args.ubatch));
  const toolCompute = tool.host.compute_mib * MiB;
  let compute = toolCompute;
  if (!formula.partial && !pool.embeddings && !pool.reranking) {
    const unreserved = (nTokens - Math.min(nTokens, slots)) * (facts as ModelMemoryFacts).n_vocab * 4;
    compute = Math.min(toolCompute, Math.max(toolCompute - unreserved, formula.compute_bytes));
  }
  const model = tool.host.model_mib * MiB;
  const kv = tool.host.context_mib * MiB;
  return {
    method: 'fit-params',
    total_bytes: model + kv + compute + formula.output_bytes + FIT_ENGINE_BASE_BYTES,
    model_bytes: model,
    kv_bytes: kv,
    compute_bytes: compute,
    output_bytes: formula.output_bytes,
    engine_bytes: FIT_ENGINE_BASE_BYTES,
    partial: formula.partial,
    devices: tool.devices,
  };
}

/** Inputs of {@link projectWithFitParams}. */
export interface FitProjectionInput {
  /** `llama-fit-params` (`EngineBinary.fit_params_path`). */
  fitParams: string;
  modelPath: string;
  facts: ModelMemoryFacts | { file_bytes: number };
  pool: PoolConfig;
  /** The engine's environment (its `CUDA_VISIBLE_DEVICES` decides the devices listed). */
  env: Readonly<Record<string, string>>;
  timeoutMs?: number;
}

/**
 * Runs `llama-fit-params` for `pool`'s engine over the model (about 40 ms on a CPU build: it reads
 * the metadata, not the weights) and makes our projection of it ({@link fromFitParams}). Rejects
 * with the tool's `MEMORY_PROJECTION_FAILED` (or a config error of the pool).
 */
export async function projectWithFitParams(input: FitProjectionInput): Promise<MemoryProjection> {
  const { pool } = input;
  const args = fitParamsArgs(pool);
  const tool = await runFitParams({
    fitParams: input.fitParams,
    model: input.modelPath,
    ctx: pool.ctx,
    slots: pool.determinism ? 1 : pool.slots,
    extraArgs: args.extraArgs,
    env: input.env,
    timeoutMs: input.timeoutMs ?? 30_000,
  });
  return fromFitParams(tool, input.facts, pool, args);
}
