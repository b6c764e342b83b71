import type { Logger } from 'pino';
import type { EngineHealth, LlamaServerClient } from '@llama-orch/llamacpp-adapter';

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
 * `close()` is idempotent and immediate: it clears the timer and aborts a probe in flight, after
 * which no callback runs.
 */
export class EngineMonitor {
  #state: 'running' | 'closed' = 'running';
  #timer: NodeJS.Timeout | undefined;
  #failures = 0;
  #down = false;
  readonly #closed = new AbortController();
  readonly #client: LlamaServerClient;
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #failuresToDown: number;
  readonly #onHealth: ((h: EngineHealth) => void) | undefined;
  readonly #onDown: (why: string) => void;
  readonly #onUp: () => void;

  constructor({ client, logger, intervalMs = 2000, failuresToDown = 2, onHealth, onDown, onUp }: EngineMonitorOptions) {
    this.#client = client;
    this.#log = logger;
    this.#intervalMs = intervalMs;
    this.#failuresToDown = failuresToDown;
    this.#onHealth = onHealth;
    this.#onDown = onDown;
    this.#onUp = onUp;
    this.#schedule();
  }

  get state(): 'running' | 'closed' {
    return this.#state;
  }

  close(): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#closed.abort(new Error('engine monitor closed'));
  }

  #schedule(): void {
    if (this.#state === 'closed') return;
    this.#timer = setTimeout(() => {
      this.#probe().catch((err: unknown) => this.#log.error({ err }, 'external engine health handling failed'));
    }, this.#intervalMs);
    this.#timer.unref();
  }

  async #probe(): Promise<void> {
    let h: EngineHealth | 'error';
    try {
      h = await this.#client.health(this.#closed.signal);
    } catch (err) {
      this.#log.debug({ err }, 'external engine probe failed');
      h = 'error';
    }
    if (this.#state === 'closed') return;
    try {
      if (h !== 'error') this.#onHealth?.(h);
      if (h === 'ready') {
        this.#failures = 0;
        if (this.#down) {
          this.#down = false;
          this.#onUp();
        }
      } else {
        this.#failures += 1;
        if (!this.#down && this.#failures >= this.#failuresToDown) {
          this.#down = true;
          this.#onDown(`external engine ${h === 'error' ? 'answered unexpectedly' : h}`);
        }
      }
    } finally {
      this.#schedule();
    }
  }
}
