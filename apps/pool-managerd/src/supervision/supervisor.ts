import type { Logger } from 'pino';
import { systemClock, type SleepingClock } from '@llama-orch/daemon-support';
import { BackoffPolicy } from './backoff.js';
import { CircuitBreaker, type BreakerState } from './circuit-breaker.js';
import type { EngineExit, EngineProcess } from './engine-process.js';
import { RestartLimiter } from './restart-limiter.js';

export type SupervisorState = 'idle' | 'starting' | 'running' | 'backoff' | 'open' | 'stopping' | 'stopped';

/** What the supervisor reports; the replica that owns it turns these into pool facts. */
export interface SupervisorEvents<M = unknown> {
  /** A new process is being started (attempt 1 = first start, later = restarts). */
  starting: (info: { attempt: number; restart: boolean }) => void;
  /** The process answered `/health` 200. */
  ready: (proc: EngineProcess, meta: M) => void;
  /** A ready process exited without being asked to. */
  exited: (info: { exit: EngineExit; proc: EngineProcess }) => void;
  /** A start failed or a process crashed; the next try waits `delayMs` (undefined when the circuit opened). */
  failure: (info: { error: string; delayMs: number | undefined; breaker: BreakerState; failures: number }) => void;
  /** Circuit opened: no starts until `retryAt` (epoch ms). */
  open: (info: { error: string; retryAt: number }) => void;
  breaker: (state: BreakerState) => void;
  stopped: () => void;
}

/** A process to start plus whatever the caller needs back on `ready` (e.g. its prepared engine). */
export interface SupervisedProcess<M> {
  proc: EngineProcess;
  meta: M;
}

export interface SupervisorOptions<M = unknown> {
  name: string;
  logger: Logger;
  /** Makes a fresh process for every attempt (a failed process is never reused); a throw counts as a failed start. */
  createProcess: () => SupervisedProcess<M> | Promise<SupervisedProcess<M>>;
  backoff?: BackoffPolicy;
  breaker?: CircuitBreaker;
  limiter?: RestartLimiter;
  clock?: SleepingClock;
  /** A process that stays ready this long resets the backoff and closes the breaker, ms. @default 60000 */
  stableAfterMs?: number;
  /**
   * Trial mode (reload): the first start failing ends supervision with an error instead of a
   * restart loop, so the caller can roll back. Later crashes are restarted normally.
   */
  failFast?: boolean;
  /** Grace between SIGTERM and SIGKILL on stop, ms. @default 5000 */
  stopTimeoutMs?: number;
}

/**
 * Restart policy for one engine replica, apart from the process wrapper: crash → restart after an
 * exponential backoff; `threshold` consecutive failures open the circuit (no starts until the
 * cool-down, then one half-open trial); restarts are also bounded per time window (storm limit).
 */
export class Supervisor<M = unknown> {
  readonly name: string;
  #state: SupervisorState = 'idle';
  readonly #log: Logger;
  readonly #createProcess: SupervisorOptions<M>['createProcess'];
  readonly #stableAfterMs: number;
  readonly #failFast: boolean;
  readonly #stopTimeoutMs: number;
  readonly #backoff: BackoffPolicy;
  readonly #breaker: CircuitBreaker;
  readonly #limiter: RestartLimiter;
  readonly #clock: SleepingClock;
  readonly #stop = new AbortController();
  readonly #listeners = new Map<keyof SupervisorEvents<M>, Set<unknown>>();
  #current: EngineProcess | undefined;
  #loop: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  #firstOutcome: Promise<void>;
  #settleFirst!: (err?: Error) => void;
  #attempt = 0;

  constructor({
    name,
    logger,
    createProcess,
    backoff,
    breaker,
    limiter,
    clock = systemClock,
    stableAfterMs = 60_000,
    failFast = false,
    stopTimeoutMs = 5000,
  }: SupervisorOptions<M>) {
    this.name = name;
    this.#log = logger;
    this.#createProcess = createProcess;
    this.#clock = clock;
    this.#stableAfterMs = stableAfterMs;
    this.#failFast = failFast;
    this.#stopTimeoutMs = stopTimeoutMs;
    this.#backoff = backoff ?? new BackoffPolicy();
    this.#breaker = breaker ?? new CircuitBreaker({ clock });
    this.#limiter = limiter ?? new RestartLimiter({ clock });
    let settled = false;
    this.#firstOutcome = new Promise<void>((resolve, reject) => {
      this.#settleFirst = (err) => {
        if (settled) return;
        settled = true;
        if (err === undefined) resolve();
        else reject(err);
      };
    });
    // Nobody may await it (normal mode); keep an unhandled rejection from crashing the daemon.
    this.#firstOutcome.catch(() => undefined);
  }

  get state(): SupervisorState {
    return this.#state;
  }

  get breakerState(): BreakerState {
    return this.#breaker.state;
  }

  /** The process currently started or running, if any. */
  get current(): EngineProcess | undefined {
    return this.#current;
  }

  on<K extends keyof SupervisorEvents<M>>(event: K, listener: SupervisorEvents<M>[K]): () => void {
    let set = this.#listeners.get(event);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
    };
  }

  /**
   * Starts supervising. The returned promise settles on the first outcome: resolved when the first
   * process is ready; rejected (failFast only) when the first start fails, or when stopped before.
   */
  start(): Promise<void> {
    if (this.#loop === undefined) {
      this.#loop = this.#run().catch((err: unknown) => {
        this.#log.error({ err }, 'supervisor loop failed');
      });
    }
    return this.#firstOutcome;
  }

  /** Stops the current process (SIGTERM, then SIGKILL) and ends supervision. Idempotent. */
  stop(timeoutMs = this.#stopTimeoutMs): Promise<void> {
    if (this.#stopping !== undefined) return this.#stopping;
    this.#stop.abort(new Error('supervisor stopped'));
    this.#stopping = (async () => {
      this.#setState('stopping');
      const proc = this.#current;
      if (proc !== undefined) await proc.stop('SIGTERM', timeoutMs);
      await this.#loop;
      this.#settleFirst(new Error('supervisor stopped before the engine became ready'));
      this.#setState('stopped');
      this.#emit('stopped');
    })();
    return this.#stopping;
  }

  async #run(): Promise<void> {
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      if (this.#breaker.check() === 'open') {
        this.#setState('open');
        const wait = Math.max(0, (this.#breaker.retryAt ?? this.#clock.now()) - this.#clock.now());
        if (!(await this.#sleep(wait))) break;
        this.#breaker.check();
        this.#emit('breaker', this.#breaker.state);
        continue;
      }
      this.#attempt += 1;
      const restart = this.#attempt > 1;
      if (restart) this.#limiter.record();
      this.#setState('starting');
      this.#emit('starting', { attempt: this.#attempt, restart });
      let proc: EngineProcess | undefined;
      let meta: M;
      try {
        const created = await this.#createProcess();
        proc = created.proc;
        meta = created.meta;
        this.#current = proc;
        if (signal.aborted) {
          await proc.stop('SIGKILL', 1000);
          break;
        }
        await proc.start(signal);
      } catch (err) {
        await proc?.stop('SIGKILL', 1000);
        if (signal.aborted) break;
        const message = err instanceof Error ? err.message : String(err);
        if (this.#failFast && this.#attempt === 1) {
          this.#settleFirst(err instanceof Error ? err : new Error(message));
          this.#current = undefined;
          this.#setState('stopped');
          return;
        }
        if (!(await this.#onFailure(message))) break;
        continue;
      }
      this.#setState('running');
      this.#settleFirst();
      this.#emit('ready', proc, meta);
      const stable = this.#stableTimer();
      const exit = await proc.exited;
      stable.cancel();
      if (signal.aborted || exit.requested) break;
      this.#emit('exited', { exit, proc });
      const what = exit.signal !== null ? `signal ${exit.signal}` : `code ${exit.code}`;
      if (!(await this.#onFailure(`engine exited (${what}): ${lastLine(proc.outputTail())}`))) break;
    }
  }

  /** Counts a failure, waits for the backoff (or the limiter); false when stopped meanwhile. */
  async #onFailure(error: string): Promise<boolean> {
    const breaker = this.#breaker.recordFailure();
    this.#emit('breaker', breaker);
    if (breaker === 'open') {
      const retryAt = this.#breaker.retryAt ?? this.#clock.now();
      this.#log.error(
        { failures: this.#breaker.failures, retry_at: new Date(retryAt).toISOString(), error },
        'circuit open: engine keeps failing',
      );
      this.#emit('failure', { error, delayMs: undefined, breaker, failures: this.#breaker.failures });
      this.#emit('open', { error, retryAt });
      return true;
    }
    const delay = Math.max(this.#backoff.next(), this.#limiter.waitMs());
    this.#log.warn(
      { error, delay_ms: delay, failures: this.#breaker.failures },
      'engine failed; restarting after backoff',
    );
    this.#emit('failure', { error, delayMs: delay, breaker, failures: this.#breaker.failures });
    this.#setState('backoff');
    return this.#sleep(delay);
  }

  #stableTimer(): { cancel: () => void } {
    const ac = new AbortController();
    const stableMs = this.#stableAfterMs;
    this.#clock.sleep(stableMs, AbortSignal.any([ac.signal, this.#stop.signal])).then(
      () => {
        if (this.#breaker.state !== 'closed' || this.#backoff.attempt > 0)
          this.#log.info({ stable_ms: stableMs }, 'engine stable: backoff reset, breaker closed');
        this.#backoff.reset();
        this.#breaker.recordSuccess();
        this.#emit('breaker', 'closed');
      },
      () => undefined,
    );
    return { cancel: () => ac.abort() };
  }

  async #sleep(ms: number): Promise<boolean> {
    try {
      await this.#clock.sleep(ms, this.#stop.signal);
      return true;
    } catch {
      return false;
    }
  }

  #setState(state: SupervisorState): void {
    this.#state = state;
  }

  #emit<K extends keyof SupervisorEvents<M>>(event: K, ...args: Parameters<SupervisorEvents<M>[K]>): void {
    const set = this.#listeners.get(event) as Set<(...a: Parameters<SupervisorEvents<M>[K]>) => void> | undefined;
    if (set === undefined) return;
    for (const l of [...set]) {
      try {
        l(...args);
      } catch (err) {
        this.#log.error({ err, event }, 'supervisor listener threw');
      }
    }
  }
}

function lastLine(text: string): string {
  return text.trim().split('\n').slice(-2).join(' | ') || 'no output';
}
