import type { SseFrame, TokenEvent } from '@llama-orch/contracts';
import type { Log } from '@llama-orch/daemon-support';
import type { SessionPoolRef } from '../../store/session-affinity-store.js';
import type { TaskLifecycleStore } from '../../store/task-lifecycle-store.js';
import type { TaskOwnershipStore } from '../../store/task-ownership-store.js';
import type { TaskLifecycle } from '../task-lifecycle.js';
import type { TaskRecord } from '../task-record.js';

/**
 * The terminal frame kept in an ended task's shared record: `id` is its frame id in the owner's log
 * (absent in records of older replicas and of tasks an adopter ended without running them). A `/v2`
 * event-stream task also keeps its token frames (`tokens`, the first one's id `first_token`), so a
 * replica can replay the log to a client resuming after its owner died (http/ended-task-answer.ts).
 */
export type StoredOutcome = SseFrame & {
  readonly id?: number;
  readonly first_token?: number;
  readonly tokens?: readonly TokenEvent[];
};

/** A task's end on its way to the store. */
export interface TaskEnd {
  readonly task: TaskRecord;
  /** The {@link StoredOutcome}, serialised. */
  readonly outcome: string;
  readonly served: SessionPoolRef | undefined;
  readonly tokensOut: number | undefined;
  /** undefined: this replica had let the task go, so the end takes it back first (if no other replica did). 0: not this replica's (refused; entry and turn still closed). */
  fence: number | undefined;
  /** The fence of a task let go: still its fence when the store says this replica holds it. */
  readonly formerFence?: number | undefined;
  /** Still to do besides the record: its queue entry out, its session's turn closed. Done once, even when the record refused. */
  queued: boolean;
  sessionOpen: boolean;
}

export interface ClusterEndWriterOptions {
  tasks: TaskOwnershipStore;
  lifecycle: TaskLifecycleStore;
  replicaId: string;
  ownerTtlMs: number;
  retainMs: number;
  logger: Log;
  storeProblem(err: unknown, what: string): void;
}

/**
 * Writes task ends to the store, and keeps those it could not write (store unreachable) for
 * {@link retry}, until written or the task is another replica's; each task's lifecycle says where
 * its end is ({@link TaskLifecycle.endRecord}), the writer keeps the unwritten ones to retry. Without it, a task that ends
 * while Redis is down would stay `running` in the store: its lease lapses, another replica takes it
 * over, and its record says something else than its client saw — or, for a queued task this
 * replica had let go, its entry would stay first in the cluster's queue with nobody to dispatch it,
 * and every later task of its model would hang behind it.
 */
export class ClusterEndWriter {
  readonly #o: ClusterEndWriterOptions;
  /** Ends not in the store yet (their lifecycles' end record `unwritten`), by task id. */
  readonly #unwritten = new Map<string, TaskEnd>();
  #retrying: Promise<void> | undefined;

  constructor(options: ClusterEndWriterOptions) {
    this.#o = options;
  }

  /** Whether the task's end waits here (the orphan sweep leaves such a task to it). */
  waiting(id: string): boolean {
    return this.#unwritten.has(id);
  }

  /** Writes the end, or keeps it for {@link retry}. Never throws. */
  async write(end: TaskEnd): Promise<void> {
    const { tasks, lifecycle, replicaId } = this.#o;
    const id = end.task.id;
    try {
      if (end.fence === undefined) {
        const won = await tasks.acquire(id, replicaId, this.#o.ownerTtlMs);
        // Let go here while the store still counted this replica's lease: the task is still its own.
        if (!won.ok && won.reason === 'held' && won.owner === replicaId && end.formerFence !== undefined)
          end.fence = end.formerFence;
        // Another replica's now, or ended, or gone: nothing of it is this replica's to write.
        else if (!won.ok) return this.#settled(end, 'none');
        else end.fence = won.fence;
      }
      const fence = end.fence;
      const session = end.sessionOpen
        ? { id: end.task.request.session_id, tokensOut: end.tokensOut, pool: end.served }
        : undefined;
      const done = await lifecycle.finish({
        id,
        fence,
        outcome: end.outcome,
        retainMs: this.#o.retainMs,
        dequeue: end.queued,
        session,
      });
      end.queued = false;
      end.sessionOpen = false;
      const refused = done.record.ok ? undefined : done.record;
      if (refused?.reason === 'fenced' && refused.owner === replicaId && refused.fence === fence) {
        // Its lease lapsed while the store was away and nobody took it: take it back, then write.
        end.fence = undefined;
        return this.#keep(end);
      }
      this.#settled(end, refused === undefined ? 'written' : 'none');
      if (refused?.reason === 'fenced' && fence !== 0)
        this.#o.logger.warn(
          { task_id: id, owner: refused.owner, fence: refused.fence },
          'task ended here, but another replica owns it now',
        );
    } catch (err) {
      this.#keep(end);
      this.#o.storeProblem(err, "writing a task's end");
    }
  }

  /** Kept for {@link retry}. */
  #keep(end: TaskEnd): void {
    end.task.life.recordEnd('unwritten');
    this.#unwritten.set(end.task.id, end);
  }

  /** Nothing more to write: `written`, or `none` (the record is not this replica's to end). */
  #settled(end: TaskEnd, how: 'written' | 'none'): void {
    end.task.life.recordEnd(how);
    this.#unwritten.delete(end.task.id);
  }

  /** The ends the store could not take yet, one at a time, oldest first; one pass at a time. Never rejects. */
  retry(): Promise<void> {
    if (this.#unwritten.size === 0) return Promise.resolve();
    this.#retrying ??= (async () => {
      for (const end of [...this.#unwritten.values()]) await this.write(end);
    })().finally(() => {
      this.#retrying = undefined;
    });
    return this.#retrying;
  }

  /** What is still unwritten is left to the other replicas' takeover. */
  close(): void {
    const n = this.#unwritten.size;
    if (n > 0)
      this.#o.logger.warn(
        { tasks: n, human: `${n} task end(s) never reached the cluster store; other replicas take those tasks over` },
        'task ends not written',
      );
    this.#unwritten.clear();
  }
}

/** Past this, an outcome keeps no tokens (a resume after its owner died gets the terminal frame alone). */
const OUTCOME_TOKENS_MAX_CHARS = 256 * 1024;

/**
 * The terminal frame with its id (`id`: undefined for a frame the task's log never gets) and, for a
 * `/v2` event stream, its tokens: what a replica replays once the owner is gone.
 */
export function storedOutcome(task: TaskRecord, frame: SseFrame, id: number | undefined): string {
  const stream = task.stream;
  if (id === undefined) return JSON.stringify(frame);
  const outcome: StoredOutcome = { ...frame, id };
  const withTokens =
    task.delivery === 'events' && stream.firstTokenId >= 0
      ? JSON.stringify({ ...outcome, first_token: stream.firstTokenId, tokens: stream.tokenRecords() })
      : undefined;
  return withTokens !== undefined && withTokens.length <= OUTCOME_TOKENS_MAX_CHARS
    ? withTokens
    : JSON.stringify(outcome);
}

/**
 * Longest a task's end waits for its record before its clients get it anyway, ms: a store that
 * does not answer (one within its command timeout) must not hold ends back; the end writer retries.
 */
export const END_WRITE_WAIT_MS = 1000;

/** Runs `deliver` once `written` settles, or after {@link END_WRITE_WAIT_MS}, whichever comes first. */
export function deliverWhenWritten(written: Promise<unknown>, deliver: () => void): void {
  let timer: NodeJS.Timeout | undefined;
  const once = (): void => {
    if (timer === undefined) return;
    clearTimeout(timer);
    timer = undefined;
    deliver();
  };
  timer = setTimeout(once, END_WRITE_WAIT_MS);
  void written.then(once);
}
