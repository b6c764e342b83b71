import { execa } from 'execa';
import type { Logger } from 'pino';
import type { PoolConfig, PoolSnapshot } from '@llama-orch/contracts';

const MIB = 1024 ** 2;

/**
 * Parses `nvidia-smi --query-gpu=index,memory.free --format=csv,noheader,nounits` (MiB), e.g.
 * `0, 80123`. Lines that do not parse are skipped.
 */
export function parseFreeMemory(output: string): Map<number, number> {
  const free = new Map<number, number>();
  for (const line of output.split('\n')) {
    const m = /^\s*(\d+)\s*,\s*(\d+(?:\.\d+)?)\s*$/.exec(line);
    if (m?.[1] === undefined || m[2] === undefined) continue;
    free.set(Number.parseInt(m[1], 10), Math.round(Number(m[2]) * MIB));
  }
  return free;
}

export interface GpuMemoryMonitorOptions {
  /** How often to sample, ms (one nvidia-smi process per sample, never one per heartbeat). */
  intervalMs: number;
  logger: Logger;
  /** @default 'nvidia-smi' */
  nvidiaSmi?: string;
  /** Longest one sample may take before it counts as failed, ms. @default 5000 */
  sampleTimeoutMs?: number;
}

/**
 * Free memory of this host's GPUs, sampled with nvidia-smi. A failed sample forgets the last
 * readings, so heartbeats leave `vram_free_bytes` out rather than report numbers that may be stale.
 */
export class GpuMemoryMonitor {
  readonly #intervalMs: number;
  readonly #log: Logger;
  readonly #nvidiaSmi: string;
  readonly #sampleTimeoutMs: number;
  readonly #closed = new AbortController();
  #closing: Promise<void> | undefined;
  #state: 'idle' | 'running' | 'closed' = 'idle';
  #free = new Map<number, number>();
  #timer: NodeJS.Timeout | undefined;
  #sampling: Promise<void> | undefined;
  #failureLogged = false;

  constructor({ intervalMs, logger, nvidiaSmi = 'nvidia-smi', sampleTimeoutMs = 5000 }: GpuMemoryMonitorOptions) {
    this.#intervalMs = intervalMs;
    this.#log = logger;
    this.#nvidiaSmi = nvidiaSmi;
    this.#sampleTimeoutMs = sampleTimeoutMs;
  }

  get state(): 'idle' | 'running' | 'closed' {
    return this.#state;
  }

  /** Samples now, then every interval. Idempotent; no-op after close. */
  start(): void {
    if (this.#state !== 'idle') return;
    this.#state = 'running';
    void this.sample();
    this.#timer = setInterval(() => void this.sample(), this.#intervalMs);
    this.#timer.unref();
  }

  /** One sample (joined when one is already running). */
  sample(): Promise<void> {
    if (this.#state === 'closed') return Promise.resolve();
    this.#sampling ??= this.#sample().finally(() => {
      this.#sampling = undefined;
    });
    return this.#sampling;
  }

  async #sample(): Promise<void> {
    const r = await execa(this.#nvidiaSmi, ['--query-gpu=index,memory.free', '--format=csv,noheader,nounits'], {
      timeout: this.#sampleTimeoutMs,
      cancelSignal: this.#closed.signal,
      reject: false,
    });
    if (this.#state === 'closed') return;
    const free = r.exitCode === 0 ? parseFreeMemory(String(r.stdout)) : new Map<number, number>();
    if (free.size === 0 && !this.#failureLogged) {
      // Once: a GPU host whose nvidia-smi stopped answering would otherwise log every interval.
      this.#failureLogged = true;
      this.#log.warn(
        { exit_code: r.exitCode, stderr: String(r.stderr ?? '').slice(0, 300) },
        'nvidia-smi gave no free-memory readings; heartbeats leave vram_free_bytes out',
      );
    } else if (free.size > 0) {
      this.#failureLogged = false;
    }
    this.#free = free;
  }

  /**
   * Free bytes on the devices of `deviceMask` (`CUDA_VISIBLE_DEVICES` form, e.g. `0,2`), or on every
   * GPU when it is absent; undefined when any of them has no reading.
   */
  freeBytes(deviceMask?: string): number | undefined {
    const ids =
      deviceMask === undefined
        ? [...this.#free.keys()]
        : deviceMask
            .split(',')
            .filter((s) => s !== '')
            .map(Number);
    if (ids.length === 0) return undefined;
    let sum = 0;
    for (const id of ids) {
      const b = this.#free.get(id);
      if (b === undefined) return undefined;
      sum += b;
    }
    return sum;
  }

  /** Stops sampling and cancels (then awaits) a sample in flight. Idempotent: every call returns the first one's promise. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#state = 'closed';
      clearInterval(this.#timer);
      this.#closed.abort();
      await this.#sampling?.catch(() => undefined);
      this.#free = new Map();
    })();
    return this.#closing;
  }
}

/**
 * Adds `vram_free_bytes` to the snapshots of pools that may use a GPU (`gpu` not `off`): the free
 * memory of their `device_mask` devices, or of every GPU when they have none.
 */
export function withVramFree(
  snapshots: PoolSnapshot[],
  pools: readonly Pick<PoolConfig, 'id' | 'gpu' | 'device_mask'>[],
  monitor: GpuMemoryMonitor,
): PoolSnapshot[] {
  for (const s of snapshots) {
    const pool = pools.find((p) => p.id === s.pool_id);
    if (pool === undefined || pool.gpu === 'off') continue;
    const free = monitor.freeBytes(pool.device_mask);
    if (free !== undefined) s.vram_free_bytes = free;
  }
  return snapshots;
}
