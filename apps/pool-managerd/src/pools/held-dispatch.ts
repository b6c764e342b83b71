import type { DispatchEvent } from '@llama-orch/contracts';
import type { PoolManagerMetrics } from '../support/metrics.js';
import { DispatchAbort } from './dispatch-signal.js';
import type { DispatchLogger } from './dispatch.js';

/** Token lines one re-attachable dispatch holds at most ({@link HELD_CHARS_MAX} too, whichever first). */
export const HELD_EVENTS_MAX = 65_536;
/** Characters of held NDJSON lines one re-attachable dispatch holds at most (16 Mi: the lines are ASCII JSON but for the text pieces). */
export const HELD_CHARS_MAX = 16 * 1024 * 1024;

/** Where an attached connection's lines go (the route's NDJSON writer on its hijacked response). */
export interface HeldSink {
  /** Queues one NDJSON line (with its `\n`); the promise, when there is one, is the back-pressure wait. */
  line(text: string): Promise<void> | undefined;
  /** Writes what is queued and ends the response: the dispatch is over. */
  end(): void;
  /** Ends a connection another attacher took over, without waiting on a reader that does not read. */
  supersede(): void;
}

export interface HeldDispatchDeps {
  poolId: string;
  taskId: string;
  reattachMs: number;
  log: DispatchLogger;
  metrics: PoolManagerMetrics;
  /** Called once when the dispatch is forgotten (its registry entry goes). */
  forget: (held: HeldDispatch) => void;
}

/**
 * One re-attachable dispatch (`reattach_ms` > 0): it runs on the engine whether or not a
 * connection is attached, and keeps every token line from its start so that a re-attach with any
 * `after` can be answered, plus its terminal line. `emit` is the dispatch's {@link DispatchEmit}.
 *
 * States: attached (a connection takes the live lines; its back-pressure pauses the engine stream)
 * → detached when that connection closes without a DELETE (the window of `reattach_ms` starts; the
 * generation goes on unpaused and its lines are held) → attached again on a re-attach (last
 * attacher wins), or, when the window passes, cancelled like a client disconnect (or, if it
 * already ended, dropped). Forgotten once its terminal line went out on a connection that finished
 * normally, on DELETE, or when the window passed. Holding more than the bounds while attached ends
 * the holding (the dispatch becomes a plain one: no re-attach, a close cancels); while detached it
 * cancels the dispatch.
 */
export class HeldDispatch {
  readonly poolId: string;
  readonly taskId: string;
  readonly #deps: HeldDispatchDeps;
  /** The dispatch's `clientGone`: aborted with a DispatchAbort that says why. */
  readonly #cancel = new AbortController();
  readonly #lines: string[] = [];
  /** Token index `i` of each held line, ascending. */
  readonly #index: number[] = [];
  #chars = 0;
  #terminal: string | undefined;
  #sink: HeldSink | undefined;
  #window: NodeJS.Timeout | undefined;
  #holding = true;
  #running = true;
  #forgotten = false;

  constructor(deps: HeldDispatchDeps) {
    this.poolId = deps.poolId;
    this.taskId = deps.taskId;
    this.#deps = deps;
  }

  /** The `clientGone` signal to run the dispatch with. */
  get signal(): AbortSignal {
    return this.#cancel.signal;
  }

  /** Whether a GET may re-attach (still held, within its bounds). */
  get reattachable(): boolean {
    return this.#holding && !this.#forgotten;
  }

  /** Held token lines (for tests and logs). */
  get heldEvents(): number {
    return this.#lines.length;
  }

  readonly emit = (ev: DispatchEvent): Promise<void> | undefined => {
    const line = `${JSON.stringify(ev)}\n`;
    if (ev.type !== 'token') this.#terminal = line;
    else if (this.#holding) this.#hold(line, ev.i);
    return this.#sink?.line(line);
  };

  /**
   * A connection takes the dispatch over: the one attached before is ended (the generation goes
   * on), then every held token line with `i > after` and the terminal line if there is one are
   * written, then the live ones. Callers check {@link reattachable} first.
   */
  attach(sink: HeldSink, after: number): void {
    this.#deps.metrics.reattach.inc({ outcome: 'reattached' });
    this.#deps.log.info(
      {
        pool_id: this.poolId,
        task_id: this.taskId,
        after,
        held_events: this.#lines.length,
        attached: this.#sink !== undefined,
      },
      'dispatch re-attached',
    );
    const before = this.#sink;
    this.#sink = sink;
    before?.supersede();
    this.#clearWindow();
    const lines = this.#lines;
    for (let p = firstAfter(this.#index, after); p < lines.length; p++) sink.line(lines[p] as string);
    if (this.#terminal !== undefined) sink.line(this.#terminal);
    if (!this.#running) sink.end();
  }

  /** The POST's own connection, attached from the start (nothing to replay). */
  attachFirst(sink: HeldSink): void {
    this.#sink = sink;
  }

  /**
   * The connection of `sink` closed; `finished` when its response ended normally. Ignored for a
   * superseded connection. A finished one after the terminal line was written out, which is not yet
   * delivered: an orchestrator killed at that moment leaves a socket whose writes still succeed
   * here, and its task is taken over a lease later. So the dispatch stays re-attachable for half
   * the window (1.5 of the orchestrator's owner leases), then is forgotten.
   */
  closed(sink: HeldSink, finished: boolean): void {
    if (sink !== this.#sink) return;
    this.#sink = undefined;
    if (this.#forgotten) return;
    if (finished && !this.#running) {
      this.#window = setTimeout(() => this.#forget(), Math.ceil(this.#deps.reattachMs / 2));
      this.#window.unref();
      return;
    }
    if (!this.#holding) {
      // Over the bounds while attached: no longer re-attachable, so a close is a cancel, as without reattach_ms.
      this.#forget();
      this.#cancel.abort(new DispatchAbort('client_gone', 'client disconnected'));
      return;
    }
    const ms = this.#deps.reattachMs;
    this.#deps.log.info(
      { pool_id: this.poolId, task_id: this.taskId, reattach_ms: ms, running: this.#running },
      'dispatch detached: waiting for a re-attach',
    );
    this.#window = setTimeout(() => this.#expire(`no orchestrator re-attached within ${ms} ms`), ms);
    this.#window.unref();
  }

  /** The dispatch's run is over (its terminal line, if any, went through {@link emit}). */
  runOver(): void {
    this.#running = false;
    if (this.#sink !== undefined) this.#sink.end();
    // Cancelled without a terminal line (window passed, replaced): nothing left to deliver.
    else if (this.#terminal === undefined) this.#forget();
  }

  /**
   * DELETE: aborts the engine request (an attached connection gets `end` with `stop_type: cancel`),
   * and the held state goes at once.
   */
  cancel(): void {
    this.#deps.metrics.reattach.inc({ outcome: 'cancelled' });
    this.#deps.log.info(
      { pool_id: this.poolId, task_id: this.taskId, running: this.#running },
      'dispatch cancelled by the orchestrator',
    );
    this.#forget();
    if (this.#running) this.#cancel.abort(new DispatchAbort('cancelled', 'cancelled by the orchestrator'));
  }

  /** A new dispatch of the same task took this one's place: cancelled as a disconnect, nothing counted. */
  replaced(): void {
    this.#forget();
    if (this.#running)
      this.#cancel.abort(new DispatchAbort('client_gone', 'a new dispatch of the same task replaced it'));
  }

  /** Daemon close: the timer goes (the pools stop their in-flight work themselves). */
  drop(): void {
    this.#forget();
  }

  #hold(line: string, i: number): void {
    this.#lines.push(line);
    this.#index.push(i);
    this.#chars += line.length;
    if (this.#lines.length <= HELD_EVENTS_MAX && this.#chars <= HELD_CHARS_MAX) return;
    if (this.#sink === undefined) {
      this.#expire(
        `held events passed the bound (${this.#lines.length} events, ${this.#chars} characters) while detached`,
      );
      return;
    }
    this.#holding = false;
    this.#lines.length = 0;
    this.#index.length = 0;
    this.#deps.log.warn(
      { pool_id: this.poolId, task_id: this.taskId, held_events: HELD_EVENTS_MAX, held_chars: HELD_CHARS_MAX },
      'dispatch held events over the bound: no longer re-attachable',
    );
  }

  #expire(why: string): void {
    if (this.#forgotten) return;
    this.#deps.metrics.reattach.inc({ outcome: 'expired' });
    if (this.#running) {
      this.#deps.log.warn(
        { pool_id: this.poolId, task_id: this.taskId, reattach_ms: this.#deps.reattachMs, human: `${why}; cancelled` },
        `${why}; cancelled`,
      );
      this.#forget();
      this.#cancel.abort(new DispatchAbort('client_gone', why));
      return;
    }
    this.#deps.log.info(
      { pool_id: this.poolId, task_id: this.taskId, reattach_ms: this.#deps.reattachMs },
      `${why}; its held end dropped`,
    );
    this.#forget();
  }

  #clearWindow(): void {
    if (this.#window !== undefined) clearTimeout(this.#window);
    this.#window = undefined;
  }

  #forget(): void {
    if (this.#forgotten) return;
    this.#forgotten = true;
    this.#holding = false;
    this.#lines.length = 0;
    this.#index.length = 0;
    this.#clearWindow();
    this.#deps.forget(this);
  }
}

/** Position of the first held token with `i > after` (indexes ascend). */
function firstAfter(index: readonly number[], after: number): number {
  let lo = 0;
  let hi = index.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((index[mid] as number) <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
