import type { PoolConfig } from '@llama-orch/contracts';
import type { DeviceMemory } from '@llama-orch/engine-provisioner';
import { readGgufHeader, type GgufHeader, type GgufValue } from '@llama-orch/model-provisioner';

/**
 * What a pool's engine will take in memory before it runs (spec 50, memory), by formula: the method
 * when the engine has no `llama-fit-params` or it fails (fit-projection.ts is the other, and borrows
 * this one's output term and, for generation pools, its compute term within the tool's bounds). From
 * the model's GGUF header and the pool's settings, with llama.cpp's own sizing rules (the bundled tree,
 * `src/llama-context.cpp`, `src/llama-kv-cache.cpp`) and allowances measured on its CPU build:
 *
 * - model: the file size. llama.cpp maps the file; decoding reads every weight, so all of it ends
 *   up resident (the tokenizer header is read, not mapped: a few hundred KB of overcount).
 * - KV cache: `n_layer × n_ctx × (n_embd_k_gqa + n_embd_v_gqa) × 2` bytes (f16 K and V), `n_ctx`
 *   padded as llama.cpp pads it (below). The buffer is cleared at start, so it is resident at once.
 * - compute: the largest graph's live tensors. Fitted to the `CPU compute buffer size` llama-server
 *   logs (flash attention on, as `auto` picks on CPU): one layer's activations of a micro-batch,
 *   `n_ubatch × 4 × (4·n_embd + 3·n_ff)`, or, where every position is an output (embeddings,
 *   reranking), the micro-batch's logits `n_ubatch × n_vocab × 4` (the allocator reuses the one for
 *   the other), plus the f16 attention mask `n_ubatch × n_ctx_seq × 2`. Within 1 % of the logged
 *   sizes over 256–1024 wide models, 512–8192 contexts, 1–4 slots, embeddings and reranking
 *   (0.25 MiB over for a 64-wide model; `memory-projection.test.ts` lists them). Pages are touched
 *   only as batches use them, so the resident share grows with the prompts served.
 * - output: the logits llama.cpp keeps per output row, `n_vocab × 4` each: one row per slot when
 *   generating; every position of a batch for embeddings and reranking (the buffer starts at one
 *   row per slot and llama.cpp grows it to the batch at the first full one: a 982-token embedding
 *   request took an engine from 47 to 291 MiB resident).
 * - engine: llama-server itself without a model (binary pages, heap, tokenizer of a 32k vocab):
 *   {@link ENGINE_BASE_BYTES}, measured.
 *
 * Not modelled: GPU offload (the same bytes, split between device and host), quantized weights
 * that llama.cpp repacks for the CPU at load (copied into anonymous memory, the mapped file pages
 * stay resident too: up to twice those tensors), a KV type other than f16, and engine flags a
 * static pool's `extra_flags` change (`-c`, `-ub`, `--cache-type-k`).
 */
export interface MemoryProjection {
  /**
   * `fit-params`: llama.cpp's own figures (`llama-fit-params`, fit-projection.ts) plus what they do
   * not count; `formula`: this module's, when the engine has no such tool or it failed.
   */
  method: 'fit-params' | 'formula';
  /** Everything below, bytes: what the host takes (device memory is in `devices`). */
  total_bytes: number;
  model_bytes: number;
  kv_bytes: number;
  compute_bytes: number;
  output_bytes: number;
  engine_bytes: number;
  /** The header lacked what the KV and compute terms need (their terms are 0: the figure is a floor). */
  partial: boolean;
  /** Per accelerator, as `llama-fit-params` printed it (MiB); empty on a CPU build and for the formula. */
  devices: DeviceMemory[];
}

/** The hyperparameters of a GGUF model the projection needs. */
export interface ModelMemoryFacts {
  file_bytes: number;
  /** `<arch>.block_count`. */
  n_layer: number;
  /** `<arch>.embedding_length`. */
  n_embd: number;
  /** `<arch>.feed_forward_length` (a per-layer array is not read: 4 × n_embd then). */
  n_ff: number;
  /** Tokens in the vocabulary (`tokenizer.ggml.tokens`, else `<arch>.vocab_size`). */
  n_vocab: number;
  /** K width of one token in one layer, all KV heads: `key_length × head_count_kv`. */
  n_embd_k_gqa: number;
  /** V width of one token in one layer, all KV heads: `value_length × head_count_kv`. */
  n_embd_v_gqa: number;
}

/**
 * llama-server without a model: RSS of the engine minus the terms above, after a request, on the
 * 32,000-token vocabulary synthetic models use — 19.4–20.3 MiB over 12 configurations (64–512 wide,
 * 1024/4096 context, 1–2 slots), rounded up.
 */
export const ENGINE_BASE_BYTES = 21 * 1024 * 1024;

/**
 * What RSS holds beyond `llama-fit-params`' host figures (after the compute correction of
 * fit-projection.ts) and the output buffer, after a batch-filling request: llama-server without a
 * model (as {@link ENGINE_BASE_BYTES}), the model file's header pages and what the tool's whole-MiB
 * figures round off. 19.9–22.8 MiB over the six generation configurations of
 * `memory-measure.test.ts` (64–1024 wide, 1024–4096 context, 1–2 slots; the 64-wide ones lowest);
 * 22 MiB, the level of the larger models, since a projection under RSS lets the budget be promised
 * twice before the engine runs.
 */
export const FIT_ENGINE_BASE_BYTES = 22 * 1024 * 1024;

/** llama-server's default micro-batch (`-ub`); engine-flags gives embedding pools the context, at most 8192. */
const DEFAULT_UBATCH = 512;
const EMBEDDING_UBATCH_MAX = 8192;
/** llama.cpp pads the context (and each sequence's share of it) to 256 cells. */
const CTX_PAD = 256;

const pad = (n: number): number => Math.ceil(n / CTX_PAD) * CTX_PAD;

/** The settings of a pool that change its engine's memory. */
export type PoolMemorySettings = Pick<PoolConfig, 'ctx' | 'slots' | 'determinism' | 'embeddings' | 'reranking'>;

/** The projection of `facts` served with `pool`'s settings (pure). */
export function projectMemory(
  facts: ModelMemoryFacts | { file_bytes: number },
  pool: PoolMemorySettings,
): MemoryProjection {
  const seqs = pool.determinism ? 1 : pool.slots;
  // llama_context: n_ctx padded, then each sequence's share padded again, and n_ctx = share × seqs.
  const ctxSeq = pad(Math.floor(pad(pool.ctx) / seqs));
  const nCtx = ctxSeq * seqs;
  const allOutputs = pool.embeddings || pool.reranking;
  const ubatch = allOutputs ? Math.min(pool.ctx, EMBEDDING_UBATCH_MAX) : DEFAULT_UBATCH;
  const model = facts.file_bytes;
  let kv = 0;
  let compute = 0;
  let output = 0;
  const partial = !('n_layer' in facts);
  if (!partial) {
    kv = facts.n_layer * nCtx * (facts.n_embd_k_gqa + facts.n_embd_v_gqa) * 2;
    const activations = ubatch * 4 * (4 * facts.n_embd + 3 * facts.n_ff);
    const logits = (allOutputs ? ubatch : 1) * facts.n_vocab * 4;
    compute = Math.max(activations, logits) + ubatch * ctxSeq * 2;
    output = facts.n_vocab * 4 * (allOutputs ? ubatch : seqs);
  }
  return {
    method: 'formula',
    total_bytes: model + kv + compute + output + ENGINE_BASE_BYTES,
    model_bytes: model,
    kv_bytes: kv,
    compute_bytes: compute,
    output_bytes: output,
    engine_bytes: ENGINE_BASE_BYTES,
    partial,
    devices: [],
  };
}

/**
 * The facts of a parsed GGUF header, or only the file size when it lacks a hyperparameter the
 * projection needs (an architecture with other key names).
 */
export function memoryFactsOf(header: GgufHeader): ModelMemoryFacts | { file_bytes: number } {
  const get = (key: string): GgufValue | undefined => header.kvs.find((kv) => kv.key === key)?.value;
  const num = (key: string): number | undefined => {
    const v = get(key);
    return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : undefined;
  };
  const arch = get('general.architecture');
  const file = { file_bytes: header.fileSize };
  if (typeof arch !== 'string') return file;
  const layers = num(`${arch}.block_count`);
  const embd = num(`${arch}.embedding_length`);
  const heads = num(`${arch}.attention.head_count`);
  if (layers === undefined || embd === undefined || heads === undefined) return file;
  const kvHeads = num(`${arch}.attention.head_count_kv`) ?? heads;
  const headDim = embd / heads;
  const tokens = get('tokenizer.ggml.tokens');
  const vocab = typeof tokens === 'object' ? tokens.length : (num(`${arch}.vocab_size`) ?? 0);
  return {
    ...file,
    n_layer: layers,
    n_embd: embd,
    n_ff: num(`${arch}.feed_forward_length`) ?? 4 * embd,
    n_vocab: vocab,
    n_embd_k_gqa: (num(`${arch}.attention.key_length`) ?? headDim) * kvHeads,
    n_embd_v_gqa: (num(`${arch}.attention.value_length`) ?? headDim) * kvHeads,
  };
}

/** Reads the GGUF header of the model file at `path` and projects it (see {@link projectMemory}). */
export async function projectModelFile(path: string, pool: PoolMemorySettings): Promise<MemoryProjection> {
  return projectMemory(memoryFactsOf(await readGgufHeader(path)), pool);
}

/**
 * A pool's `memory_bytes`: what its engine takes or may take. Before an engine is bound, the
 * projection (while the pool is coming up or serving; nothing when it is `stopped` or `failed`
 * without one). Once bound, the larger of the engine's resident size and the projection: RSS counts
 * only the pages touched so far, and llama.cpp's compute buffers are touched only as batches use
 * them (an embeddings pool's logits buffer, `n_ubatch × n_vocab × 4` bytes, stays untouched until
 * its first full batch), so RSS alone would let the budget be promised twice. RSS above the
 * projection (a model the projection does not cover, e.g. repacked quantized weights) wins.
 */
export function committedBytes(m: {
  measured: number | undefined;
  projected: number | undefined;
  /** No engine and none coming (`stopped`, `failed`). */
  holdsNothing: boolean;
}): number | undefined {
  const projected = m.holdsNothing ? undefined : m.projected;
  if (m.measured === undefined) return projected;
  return Math.max(m.measured, projected ?? 0);
}

const MiB = 1024 * 1024;

/**
 * `612 MiB (model 259 + KV 256 + compute 33 + output 0.1 + engine 21 MiB, by llama-fit-params; CUDA0
 * 1200 MiB)` for messages and logs: the host's terms, how they were projected, then each device's total.
 */
export function describeProjection(p: MemoryProjection): string {
  const m = (b: number): string => (b >= 10 * MiB ? String(Math.round(b / MiB)) : (b / MiB).toFixed(1));
  const parts = `model ${m(p.model_bytes)} + KV ${m(p.kv_bytes)} + compute ${m(p.compute_bytes)} + output ${m(p.output_bytes)} + engine ${m(p.engine_bytes)} MiB`;
  const unknown = p.method === 'formula' ? 'KV and compute' : 'output';
  const devices = p.devices.map((d) => `; ${d.name} ${d.total_mib} MiB`).join('');
  return `${m(p.total_bytes)} MiB (${parts}, by ${p.method === 'formula' ? 'the formula' : 'llama-fit-params'}${p.partial ? `; ${unknown} unknown for this architecture` : ''}${devices})`;
}
