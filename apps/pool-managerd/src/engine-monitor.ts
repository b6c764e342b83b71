import type { Logger } from 'pino';
import type { HandoffFile } from '@llama-orch/contracts';
import type { EngineHealth, LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import { HandoffError } from './errors.js';
import type { EngineBinding } from './registry.js';

/**
 * Checks an engine named by an external handoff: waits (up to `timeoutMs`) for `/health` 200, then
 * reads `/props` for slots, context and build identity. Throws {@link HandoffError} when the engine
 * does not become healthy, so the file is rejected with that reason.
 */
export async function probeExternalEngine(
  client: LlamaServerClient,
  handoff: HandoffFile,
  opts: { timeoutMs: number; intervalMs?: number; signal?: AbortSignal; onHealth?: (h: EngineHealth) => void },
): Promise<EngineBinding> {
  const deadline = Date.now() + opts.timeoutMs;
  let last: EngineHealth | string = 'down';
  for (;;) {
    try {
      last = await client.health(opts.signal);
    } catch (err) {
      last = `error: ${(err as Error).message}`;
    }
    if (last === 'ready' || last === 'loading' || last === 'down') opts.onHealth?.(last);
    if (last === 'ready') break;
    if (opts.signal?.aborted === true || Date.now() >= deadline) {
      throw new HandoffError(`engine at ${handoff.url} is not healthy (${last}) after ${opts.timeoutMs} ms`, { url: handoff.url });
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 100).unref());
  }
  let props;
  try {
    props = await client.props(opts.signal);
  } catch (err) {
    throw new HandoffError(`engine at ${handoff.url} answered /health but not /props: ${(err as Error).message}`, { url: handoff.url }, { cause: err });
  }
  return {
    url: handoff.url,
    engine_version: props.build_info,
    slots_total: props.total_slots,
    ctx: props.n_ctx,
    pid: handoff.pid,
    mode: 'external',
  };
}

export interface EngineMonitorOptions {
  client: LlamaServerClient;
  logger: Logger;
  /** Probe interval, ms. @default 2000 */
  intervalMs?: number;
  /** Consecutive failed probes before the engine counts as down. @default 2 */
  failuresToDown?: number;
  onHealth?: (h: EngineHealth) => void;
  onDown: (why: string) => void;
  onUp: () => void;
}

/**
 * Watches an engine pool-managerd does not supervise (adopted from an external handoff): there is
 * no exit event, so `/health` is polled; down after `failuresToDown` failures, up again on 200.
 */
export class EngineMonitor {
  #state: 'running' | 'closed' = 'running';
  #timer: NodeJS.Timeout | undefined;
  #failures = 0;
  #down = false;
  readonly #o: EngineMonitorOptions;

  constructor(options: EngineMonitorOptions) {
    this.#o = options;
    this.#schedule();
  }

  get state(): 'running' | 'closed' {
    return this.#state;
  }

  close(): void {
    this.#state = 'closed';
    if (this.#timer !== undefined) clearTimeout(this.#timer);
  }

  #schedule(): void {
    if (this.#state === 'closed') return;
    this.#timer = setTimeout(() => void this.#probe(), this.#o.intervalMs ?? 2000);
    this.#timer.unref();
  }

  async #probe(): Promise<void> {
    let h: EngineHealth | 'error';
    try {
      h = await this.#o.client.health();
    } catch (err) {
      this.#o.logger.debug({ err }, 'external engine probe failed');
      h = 'error';
    }
    if (this.#state === 'closed') return;
    if (h !== 'error') this.#o.onHealth?.(h);
    if (h === 'ready') {
      this.#failures = 0;
      if (this.#down) {
        this.#down = false;
        this.#o.onUp();
      }
    } else {
      this.#failures += 1;
      if (!this.#down && this.#failures >= (this.#o.failuresToDown ?? 2)) {
        this.#down = true;
        this.#o.onDown(`external engine ${h === 'error' ? 'answered unexpectedly' : h}`);
      }
    }
    this.#schedule();
  }
}
