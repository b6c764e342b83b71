import type { Log } from '@llama-orch/daemon-support';
import type { ResponseStore } from '../store/response-store.js';
import type { TaskStream } from '../streams/task-stream.js';
import type { TaskService } from '../tasks/task-service.js';
import { decodeStored, encodeStored, endedRecord, isFinal, type StoredResponse } from './stored-response.js';

/** A stored response and the key that created it (only it and operator keys may see it). */
export interface LoadedResponse {
  readonly record: StoredResponse;
  readonly clientKey: string | undefined;
}

export interface ResponseRecordsOptions {
  readonly store: ResponseStore;
  /** How long an entry is kept from each write, ms (`task_retention_ms`). */
  readonly retentionMs: number;
  readonly log: Log;
}

/**
 * The Responses door's side of the `ResponseStore`: records read and written as
 * {@link StoredResponse}s, the writes of one response in order (a background response's final write
 * never lands before its first), and the watch that writes a response's final record when its task
 * ends. The watch runs on the replica that holds the task (the frames are there); a response whose
 * task another replica holds is watched there, from its creation or from the first read that
 * reaches it (a takeover).
 */
export class ResponseRecords {
  readonly #store: ResponseStore;
  readonly #ttlMs: number;
  readonly #log: Log;
  /** The last write or delete of each response still under way: the next one waits for it. */
  readonly #writes = new Map<string, Promise<void>>();
  /** Responses (by task id) whose end this replica watches. */
  readonly #watched = new Set<string>();

  constructor(o: ResponseRecordsOptions) {
    this.#store = o.store;
    this.#ttlMs = o.retentionMs;
    this.#log = o.log;
  }

  async load(id: string): Promise<LoadedResponse | undefined> {
    const entry = await this.#store.get(id);
    if (entry === undefined) return undefined;
    return { record: decodeStored(id, entry.body), clientKey: entry.clientKey };
  }

  /**
   * Writes the record (after any earlier write of it). `onlyIfKept`: skip it when the entry is gone
   * (deleted while its task ran: a final write must not bring it back).
   */
  write(record: StoredResponse, clientKey: string | undefined, onlyIfKept = false): Promise<void> {
    const id = String(record.response.id);
    return this.#inOrder(id, async () => {
      if (onlyIfKept && (await this.#store.get(id)) === undefined) return;
      await this.#store.put({ id, clientKey, body: encodeStored(record) }, this.#ttlMs);
    });
  }

  /** {@link write}, its failure logged rather than thrown (a final write nobody waits on). */
  writeLogged(record: StoredResponse, clientKey: string | undefined, onlyIfKept: boolean): Promise<void> {
    return this.write(record, clientKey, onlyIfKept).catch((err: unknown) =>
      this.#log.warn(
        { err, response_id: record.response.id, task_id: record.task_id },
        'stored response: final write failed',
      ),
    );
  }

  /**
   * A previous response as a next turn reads it: its final record; made final from `stream` when its
   * task ended here and the final write is still on its way; else the final write a moment later
   * (the replica that ran it writes it as its client got the end). Undefined: it has not ended (a
   * background response still running).
   */
  async settled(
    loaded: LoadedResponse,
    stream: TaskStream | undefined,
    waitMs = 2000,
  ): Promise<StoredResponse | undefined> {
    if (isFinal(loaded.record)) return loaded.record;
    if (stream?.terminal !== undefined) return endedRecord(loaded.record, stream.tokenRecords(), stream.terminal);
    if (loaded.record.background) return undefined;
    const until = Date.now() + waitMs;
    while (Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      const again = await this.load(String(loaded.record.response.id));
      if (again !== undefined && isFinal(again.record)) return again.record;
    }
    return undefined;
  }

  /** Removes the entry after the writes asked for before (a final write under way is not undone by it). */
  delete(id: string): Promise<boolean> {
    return this.#inOrder(id, () => this.#store.delete(id));
  }

  /** Runs `step` after the steps of `id` asked for before it, whether they failed or not. */
  #inOrder<T>(id: string, step: () => Promise<T>): Promise<T> {
    const next = (this.#writes.get(id) ?? Promise.resolve()).then(step, step);
    const done = next.then(
      () => undefined,
      () => undefined,
    );
    this.#writes.set(id, done);
    void done.then(() => {
      if (this.#writes.get(id) === done) this.#writes.delete(id);
    });
    return next;
  }

  /**
   * Writes the record's final form once `stream` ends (at once when it has): made from its frames,
   * or from `answer()` (the object the door rendered from the engine's one answer). Nothing is
   * written for a stream that moved to another replica (it is watched there), nor, with
   * `skipRefused`, for a task that failed before its first token (its client got an error status,
   * not this response). `onlyIfKept` (default: a background response's): the record was written
   * before, and a deleted one stays deleted. A background response is watched once per replica.
   */
  finishWhenEnded(
    stream: TaskStream,
    record: StoredResponse,
    clientKey: string | undefined,
    o: { answer?: () => Record<string, unknown> | undefined; skipRefused?: boolean; onlyIfKept?: boolean } = {},
  ): void {
    if (record.background) {
      if (this.#watched.has(record.task_id)) return;
      this.#watched.add(record.task_id);
    }
    const ended = (): void => {
      this.#watched.delete(record.task_id);
      const terminal = stream.terminal;
      if (terminal === undefined) return;
      const tokens = stream.tokenRecords();
      if (o.skipRefused === true && terminal.event === 'error' && tokens.length === 0) return;
      void this.writeLogged(
        endedRecord(record, tokens, terminal, o.answer?.()),
        clientKey,
        o.onlyIfKept ?? record.background,
      );
    };
    whenEnded(stream, ended);
  }

  /**
   * Watches the background responses that end here without a watch: a task this replica took over
   * from one that died (tasks/shared/adoption.ts), which no read reached before its end. Only tasks
   * of the Responses door with the `events` delivery (its background ones) cost a store read. Returns
   * the unsubscribe function.
   */
  watchTakenOver(tasks: Pick<TaskService, 'subscribe' | 'get'>): () => void {
    return tasks.subscribe((e) => {
      if (e.type !== 'ended') return;
      const task = tasks.get(e.task.taskId);
      if (task === undefined || !('door' in task) || task.door !== 'responses' || task.delivery !== 'events') return;
      if (this.#watched.has(task.id)) return;
      const id = `resp_${task.id}`;
      this.load(id)
        .then((loaded) => {
          if (loaded !== undefined && loaded.record.background && !isFinal(loaded.record))
            this.finishWhenEnded(task.stream, loaded.record, loaded.clientKey);
        })
        .catch((err: unknown) => this.#log.warn({ err, response_id: id }, 'stored response: read at its end failed'));
    });
  }
}

/** Runs `then` once `stream` is no longer open (ended or moved); at once when it is not. */
export function whenEnded(stream: TaskStream, then: () => void): void {
  if (stream.state !== 'open') return then();
  const listener = (): void => {
    if (stream.state === 'open') return;
    stream.unsubscribe(listener);
    then();
  };
  stream.subscribe(listener);
}

/** Resolves once `stream` is no longer open, or after `timeoutMs`. */
export function untilEnded(stream: TaskStream, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    timer.unref();
    whenEnded(stream, () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
