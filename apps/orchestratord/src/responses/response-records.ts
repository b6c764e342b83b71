import type { Log } from '@llama-orch/daemon-support';
import type { ResponseStore } from '../store/response-store.js';
import type { TaskStream } from '../streams/task-stream.js';
import { decodeStored, encodeStored, endedRecord, type StoredResponse } from './stored-response.js';

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
   * not this response). A background response is watched once per replica.
   */
  finishWhenEnded(
    stream: TaskStream,
    record: StoredResponse,
    clientKey: string | undefined,
    o: { answer?: () => Record<string, unknown> | undefined; skipRefused?: boolean } = {},
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
      const final = endedRecord(record, tokens, terminal, o.answer?.());
      this.write(final, clientKey, record.background).catch((err: unknown) =>
        this.#log.warn(
          { err, response_id: record.response.id, task_id: record.task_id },
          'stored response: final write failed',
        ),
      );
    };
    whenEnded(stream, ended);
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
