import { constants } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import type { FSWatcher } from 'chokidar';
import type { Logger } from 'pino';
import { HandoffFileSchema, formatIssues, type HandoffFile } from '@llama-orch/contracts';
import { HandoffError } from '../errors.js';
import { isHandoffName } from './handoff-file.js';

export interface HandoffWatcherOptions {
  /** `<runtime_dir>/engines`. */
  dir: string;
  logger: Logger;
  /**
   * Valid file seen (new or changed). Throw {@link HandoffError} to reject it with a reason.
   * `signal` aborts when the watcher closes: long checks (an engine's health) end with it.
   */
  onHandoff: (path: string, handoff: HandoffFile, signal: AbortSignal) => Promise<void>;
  /** File removed. */
  onRemoved: (path: string) => Promise<void>;
  /** Called for every rejection, with a short machine reason (metrics label). */
  onRejected?: (path: string, reason: HandoffRejectReason, message: string) => void;
  /** Called for every accepted file. */
  onAccepted?: (path: string, handoff: HandoffFile) => void;
  /** A file must be unchanged this long before it is read (hand-copied files arrive in pieces), ms. @default 100 */
  stabilityMs?: number;
}

export type HandoffRejectReason = 'unreadable' | 'not_json' | 'schema' | 'file_name' | 'rejected';

/** A handoff file is a few hundred bytes; anything past this is refused unread. */
export const MAX_HANDOFF_BYTES = 64 * 1024;

/**
 * Reads a handoff candidate without trusting it: opened non-blocking (a FIFO would otherwise block
 * a libuv thread forever), only a regular file (a link to `/dev/zero` never ends), at most
 * {@link MAX_HANDOFF_BYTES} (a huge file would be read whole into memory).
 */
async function readBounded(path: string): Promise<string> {
  const fh = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new Error('not a regular file');
    if (st.size > MAX_HANDOFF_BYTES)
      throw new Error(`${st.size} bytes, more than the ${MAX_HANDOFF_BYTES} a handoff file may have`);
    const buf = Buffer.alloc(MAX_HANDOFF_BYTES + 1);
    let len = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, len, buf.length - len, len);
      if (bytesRead === 0) break;
      len += bytesRead;
      if (len > MAX_HANDOFF_BYTES) throw new Error(`more than the ${MAX_HANDOFF_BYTES} bytes a handoff file may have`);
    }
    return buf.subarray(0, len).toString('utf8');
  } finally {
    await fh.close();
  }
}

/**
 * Watches the handoff dir (chokidar). New and changed `*.json` files are parsed with the
 * HandoffFile schema and handed to `onHandoff`; bad files are rejected with a logged reason and
 * remembered by (mtime, size) so they are not retried until they change (no retry storm, no crash).
 * Removed files go to `onRemoved`. Events for one path are handled in order.
 */
export class HandoffWatcher {
  #state: 'idle' | 'watching' | 'closed' = 'idle';
  #watcher: FSWatcher | undefined;
  #closing: Promise<void> | undefined;
  readonly #closed = new AbortController();
  readonly #dir: string;
  readonly #log: Logger;
  readonly #onHandoff: HandoffWatcherOptions['onHandoff'];
  readonly #onRemoved: HandoffWatcherOptions['onRemoved'];
  readonly #onRejected: HandoffWatcherOptions['onRejected'];
  readonly #onAccepted: HandoffWatcherOptions['onAccepted'];
  readonly #stabilityMs: number;
  /** path → `mtime:size` of a rejected version. */
  readonly #bad = new Map<string, string>();
  readonly #queues = new Map<string, Promise<void>>();

  constructor({ dir, logger, onHandoff, onRemoved, onRejected, onAccepted, stabilityMs = 100 }: HandoffWatcherOptions) {
    this.#dir = dir;
    this.#log = logger;
    this.#onHandoff = onHandoff;
    this.#onRemoved = onRemoved;
    this.#onRejected = onRejected;
    this.#onAccepted = onAccepted;
    this.#stabilityMs = stabilityMs;
  }

  get state(): 'idle' | 'watching' | 'closed' {
    return this.#state;
  }

  /** Starts watching; resolves after the initial scan was queued. */
  async start(): Promise<void> {
    if (this.#state !== 'idle') return;
    this.#state = 'watching';
    const stability = this.#stabilityMs;
    // Loaded here, not with the module: the watcher starts after the daemon serves (not on the
    // path to the first engine spawn).
    const { watch } = await import('chokidar');
    if (this.#state !== 'watching') return;
    const w = watch(this.#dir, {
      depth: 0,
      ignoreInitial: false,
      ignored: (path, stats) => stats?.isFile() === true && !isHandoffName(path),
      awaitWriteFinish:
        stability > 0
          ? { stabilityThreshold: stability, pollInterval: Math.max(10, Math.floor(stability / 4)) }
          : false,
    });
    this.#watcher = w;
    w.on('add', (path) => this.#enqueue(path, () => this.#ingest(path)));
    w.on('change', (path) => this.#enqueue(path, () => this.#ingest(path)));
    w.on('unlink', (path) => {
      if (!isHandoffName(path)) return;
      this.#enqueue(path, async () => {
        this.#bad.delete(path);
        await this.#onRemoved(path);
      });
    });
    w.on('error', (err) => this.#log.error({ err }, 'handoff watcher error'));
    await new Promise<void>((resolve) => w.once('ready', () => resolve()));
  }

  /** Resolves when every queued event has been handled (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.#queues.size > 0) await Promise.all([...this.#queues.values()]);
  }

  /** Stops watching; handlers in flight are aborted and awaited. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#state = 'closed';
      this.#closed.abort(new Error('handoff watcher closed'));
      await this.#watcher?.close();
      await this.idle();
    })();
    return this.#closing;
  }

  #enqueue(path: string, task: () => Promise<void>): void {
    if (this.#state === 'closed') return;
    const prev = this.#queues.get(path) ?? Promise.resolve();
    const next = prev
      .then(task)
      .catch((err: unknown) => this.#log.error({ err, path }, 'handoff event handler failed'))
      .finally(() => {
        if (this.#queues.get(path) === next) this.#queues.delete(path);
      });
    this.#queues.set(path, next);
  }

  async #ingest(path: string): Promise<void> {
    if (!isHandoffName(path)) return;
    let key: string;
    try {
      const st = await stat(path);
      key = `${st.mtimeMs}:${st.size}`;
    } catch {
      return; // Vanished between the event and now; its unlink event follows.
    }
    if (this.#bad.get(path) === key) return;
    const reject = (reason: HandoffRejectReason, message: string, err?: unknown): void => {
      this.#bad.set(path, key);
      this.#log.warn({ path, reason, ...(err !== undefined ? { err } : {}) }, `handoff file rejected: ${message}`);
      this.#onRejected?.(path, reason, message);
    };
    let text: string;
    try {
      text = await readBounded(path);
    } catch (err) {
      reject('unreadable', `cannot read: ${(err as Error).message}`, err);
      return;
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      reject('not_json', `not JSON (${(err as Error).message})`);
      return;
    }
    const parsed = HandoffFileSchema.safeParse(json);
    if (!parsed.success) {
      reject('schema', `not a HandoffFile: ${formatIssues(parsed.error).replaceAll('\n', '; ')}`);
      return;
    }
    const h = parsed.data;
    if (basename(path) !== `${h.pool_id}-${h.replica_id}.json`) {
      reject('file_name', `file name must be ${h.pool_id}-${h.replica_id}.json`);
      return;
    }
    try {
      await this.#onHandoff(path, h, this.#closed.signal);
      this.#bad.delete(path);
      this.#onAccepted?.(path, h);
    } catch (err) {
      if (err instanceof HandoffError) {
        reject('rejected', err.message);
        return;
      }
      throw err;
    }
  }
}
