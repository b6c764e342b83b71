import type { ErrorCode } from '@llama-orch/contracts';

/** How an ended task ended: `ok` (end frame), `canceled` (end frame with `canceled`), `error` (error frame). */
export type TaskOutcome = 'ok' | 'error' | 'canceled';

/** What an ended task leaves for observers (the dashboard's recent tasks); times in ms since the epoch. */
export interface EndedTask {
  readonly taskId: string;
  readonly correlationId: string;
  /** The model as the client named it (an alias stays the alias). */
  readonly model: string;
  readonly priority: 'interactive' | 'batch';
  /** Where it last ran; undefined when it never left the queue. */
  readonly nodeId: string | undefined;
  readonly poolId: string | undefined;
  /** Tokens generated: the engine's count from the end frame, else the token frames relayed. */
  readonly tokensOut: number;
  /** Admission → first token; undefined when no token came. */
  readonly ttftMs: number | undefined;
  readonly admittedAt: number;
  readonly endedAt: number;
  readonly outcome: TaskOutcome;
  /** The error frame's code when `outcome` is `error`. */
  readonly code: ErrorCode | undefined;
}

/**
 * Task life events for observers that are not the task's own client (the dashboard feed). Per
 * task, never per token: tokens relayed are read from a cumulative count
 * (`TaskService.tokensRelayed()`), so the relay's hot path does no work for them.
 * - `admitted`: in the queue; `dispatched`: a slot was leased and its dispatch starts (again after
 *   a re-placement);
 * - `first-token`: the task's first token was relayed, `ttftMs` after admission;
 * - `ended`: the terminal frame was written.
 */
export type TaskEvent =
  | { readonly type: 'admitted' | 'dispatched'; readonly taskId: string }
  | { readonly type: 'first-token'; readonly taskId: string; readonly at: number; readonly ttftMs: number }
  | { readonly type: 'ended'; readonly task: EndedTask };

export type TaskEventListener = (e: TaskEvent) => void;

/**
 * The listeners of task events. Listeners run synchronously inside the task service's
 * transitions, so they must be cheap and must not throw (a throw would interrupt the transition
 * that emitted the event).
 */
export class TaskEvents {
  readonly #listeners = new Set<TaskEventListener>();

  /** Whether anyone listens: callers skip building events nobody reads. */
  get observed(): boolean {
    return this.#listeners.size > 0;
  }

  /** Returns the unsubscribe function (idempotent). */
  subscribe(listener: TaskEventListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  emit(e: TaskEvent): void {
    for (const l of this.#listeners) l(e);
  }

  clear(): void {
    this.#listeners.clear();
  }
}
