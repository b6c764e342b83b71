import type { PoolConfig } from '@llama-orch/contracts';
import { EngineProvisionError } from './errors.js';

/** Loopback: only pool-managerd talks to engines. */
export const ENGINE_HOST = '127.0.0.1';

/** Aliases of `--n-gpu-layers` that operators write in `extra_flags`. */
const GPU_LAYER_ALIASES = new Set(['--n-gpu-layers', '--gpu-layers', '--ngl', '-ngl']);

/**
 * Flags the provisioner owns; setting them in `extra_flags` would break an invariant (loopback
 * bind, the chosen port, the configured model/ctx/slots), so it is a config error.
 */
const MANAGED_FLAGS = new Set([
  '-m',
  '--model',
  '--host',
  '--port',
  '-c',
  '--ctx-size',
  '-np',
  '--parallel',
  '-hf',
  '--hf-repo',
  '--api-key',
  '--api-key-file',
]);

/** Inputs of {@link buildEngineFlags}. */
export interface EngineFlagsInput {
  pool: PoolConfig;
  /** Model file (`-m`). */
  modelPath: string;
  /** Bind port, already chosen (1..65535). */
  port: number;
  /** Bind host. @default 127.0.0.1 */
  host?: string;
}

/** Slots the engine will have: the determinism profile forces one. */
export function effectiveSlots(pool: PoolConfig): number {
  return pool.determinism ? 1 : pool.slots;
}

function splitFlag(token: string): { name: string; inlineValue?: string } {
  const eq = token.indexOf('=');
  if (token.startsWith('-') && eq > 0) return { name: token.slice(0, eq), inlineValue: token.slice(eq + 1) };
  return { name: token };
}

/**
 * Normalises `extra_flags`: every GPU-layer alias (`--ngl N`, `-ngl N`, `--gpu-layers N`,
 * `--n-gpu-layers=N`) becomes `--n-gpu-layers N`; everything else passes through in order.
 * Returns the GPU-layer value found, if any.
 */
export function normaliseExtraFlags(extra: readonly string[], poolId: string): { flags: string[]; gpuLayers?: string } {
  const flags: string[] = [];
  let gpuLayers: string | undefined;
  const managed: string[] = [];
  for (let i = 0; i < extra.length; i++) {
    const token = extra[i] as string;
    const { name, inlineValue } = splitFlag(token);
    if (GPU_LAYER_ALIASES.has(name)) {
      const value = inlineValue ?? extra[i + 1];
      if (inlineValue === undefined) i++;
      if (value === undefined || value.startsWith('-')) {
        throw new EngineProvisionError(
          'CONFIG_INVALID',
          `pools[${poolId}].extra_flags: ${name} needs a value (a number, auto or all)`,
          { poolId, flag: name },
        );
      }
      gpuLayers = value;
      continue;
    }
    if (MANAGED_FLAGS.has(name)) managed.push(name);
    flags.push(token);
  }
  if (managed.length > 0) {
    throw new EngineProvisionError(
      'CONFIG_INVALID',
      `pools[${poolId}].extra_flags may not set ${managed.join(', ')}: model, host, port, ctx and slots come from the pool config`,
      {
        poolId,
        flags: managed,
      },
    );
  }
  return gpuLayers === undefined ? { flags } : { flags, gpuLayers };
}

/** Largest physical batch given to an embedding or reranking engine, tokens. */
const EMBEDDING_BATCH_MAX = 8192;

/**
 * The complete argv after the binary for one engine (pure). Always `-m`, `--host`, `--port`,
 * `-c`, `-np` (without them llama-server starts in router mode or picks 4 unified slots),
 * `--metrics` and `--no-webui`; `--n-gpu-layers` from `gpu_layers` (or a normalised alias in
 * `extra_flags`; both at once is a config error); the determinism profile adds `-np 1
 * --no-cont-batching`; `embeddings`/`reranking` add `--embeddings` (with `--pooling` when set) or
 * `--reranking` and a physical batch of the context (at most 8192); then the remaining `extra_flags`.
 */
export function buildEngineFlags(input: EngineFlagsInput): string[] {
  const { pool, modelPath, port } = input;
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new EngineProvisionError('CONFIG_INVALID', `engine port must be 1..65535, got ${String(port)}`, {
      poolId: pool.id,
      port,
    });
  }
  const extra = normaliseExtraFlags(pool.extra_flags, pool.id);
  if (extra.gpuLayers !== undefined && pool.gpu_layers !== undefined) {
    throw new EngineProvisionError(
      'CONFIG_INVALID',
      `pools[${pool.id}]: gpu_layers is set and extra_flags sets it again; keep one`,
      { poolId: pool.id },
    );
  }
  const flags = [
    '-m',
    modelPath,
    '--host',
    input.host ?? ENGINE_HOST,
    '--port',
    String(port),
    '-c',
    String(pool.ctx),
    '-np',
    String(effectiveSlots(pool)),
    '--metrics',
    '--no-webui',
  ];
  if (pool.determinism) flags.push('--no-cont-batching');
  if (pool.embeddings || pool.reranking) {
    // One input is pooled within one physical batch: without a larger one, inputs over llama-server's
    // default 512 tokens fail ("input is too large to process").
    const batch = String(Math.min(pool.ctx, EMBEDDING_BATCH_MAX));
    flags.push(pool.reranking ? '--reranking' : '--embeddings', '-b', batch, '-ub', batch);
    if (pool.pooling !== undefined) flags.push('--pooling', pool.pooling);
  }
  const gpuLayers = pool.gpu_layers ?? extra.gpuLayers;
  if (gpuLayers !== undefined) flags.push('--n-gpu-layers', String(gpuLayers));
  if (pool.threads !== undefined) flags.push('-t', String(pool.threads));
  return [...flags, ...extra.flags];
}
