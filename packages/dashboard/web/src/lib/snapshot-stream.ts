import type { DashboardSnapshot } from '@llama-orch/contracts';
import { ForbiddenError, UnauthorizedError, type ApiClient } from './api.js';
import { backoffDelay, DEFAULT_BACKOFF, type BackoffPolicy } from './backoff.js';
import { parseSnapshot } from './snapshot.js';
import { readSse } from './sse.js';

/**
 * Where the connection stands, as the header shows it:
 * - `connecting`: a request is out (attempt 0 = the first, or the first after a key change);
 * - `live`: snapshots arrive;
 * - `retrying`: the last connection failed or ended; the next attempt is at `retry_at_ms`;
 * - `needs_key`: orchestratord answered 401, retrying cannot help; waits for `reconnect()` after a key is entered;
 * - `forbidden`: 403, the key's role may not read the dashboard; likewise waits for another key;
 * - `closed`: `close()` was called (the page is going away).
 */
export type StreamStatus =
  | { state: 'connecting'; attempt: number }
  | { state: 'live'; since_ms: number }
  | { state: 'retrying'; attempt: number; retry_at_ms: number; reason: string }
  | { state: 'needs_key'; reason: string }
  | { state: 'forbidden'; reason: string }
  | { state: 'closed' };

export interface SnapshotStreamOptions {
  api: ApiClient;
  onSnapshot(snapshot: DashboardSnapshot): void;
  onStatus(status: StreamStatus): void;
  /** @default '/v2/dashboard/events' */
  path?: string;
  /** @default DEFAULT_BACKOFF */
  backoff?: BackoffPolicy;
  /**
   * Reconnect when nothing (no frame, no keep-alive comment) arrived for this long: a proxy or a
   * sleeping laptop can leave a dead connection that never errors. orchestratord sends a comment at
   * least every 15 s. @default 45000
   */
  idleTimeoutMs?: number;
  /** @default Date.now */
  now?: () => number;
}

/**
 * The page's one connection to `GET /v2/dashboard/events`: reads `snapshot` frames, reconnects
 * with backoff when the stream fails or ends, and stops (until `reconnect()`) on 401/403.
 * `close()` is idempotent: it aborts the request, clears every timer, and no callback runs after it.
 */
export class SnapshotStream {
  readonly #opts: Required<Omit<SnapshotStreamOptions, 'onSnapshot' | 'onStatus' | 'api'>> &
    Pick<SnapshotStreamOptions, 'onSnapshot' | 'onStatus' | 'api'>;
  #status: StreamStatus = { state: 'connecting', attempt: 0 };
  #attempt = 0;
  #controller: AbortController | undefined;
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  #started = false;
  #closed = false;

  constructor(opts: SnapshotStreamOptions) {
    this.#opts = {
      path: '/v2/dashboard/events',
      backoff: DEFAULT_BACKOFF,
      idleTimeoutMs: 45_000,
      now: Date.now,
      ...opts,
    };
  }

  get status(): StreamStatus {
    return this.#status;
  }

  start(): void {
    if (this.#closed || this.#started) return;
    this.#started = true;
    void this.#connect();
  }

  /** Drops the current connection (or pending retry) and connects now: after the key changed. */
  reconnect(): void {
    if (this.#closed) return;
    this.#stopCurrent();
    this.#attempt = 0;
    void this.#connect();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopCurrent();
    this.#setStatus({ state: 'closed' });
  }

  #stopCurrent(): void {
    clearTimeout(this.#retryTimer);
    clearTimeout(this.#idleTimer);
    this.#retryTimer = undefined;
    const c = this.#controller;
    this.#controller = undefined;
    c?.abort(new Error('replaced'));
  }

  #setStatus(status: StreamStatus): void {
    this.#status = status;
    this.#opts.onStatus(status);
  }

  /** (Re)starts the silence timer of connection `c`. */
  #armIdle(c: AbortController): void {
    clearTimeout(this.#idleTimer);
    const ms = this.#opts.idleTimeoutMs;
    this.#idleTimer = setTimeout(() => c.abort(new Error(`nothing received for ${ms} ms`)), ms);
  }

  async #connect(): Promise<void> {
    const c = new AbortController();
    this.#controller = c;
    this.#setStatus({ state: 'connecting', attempt: this.#attempt });
    try {
      const res = await this.#opts.api.request(this.#opts.path, {
        headers: { accept: 'text/event-stream' },
        cache: 'no-store',
        signal: c.signal,
      });
      if (res.body === null) throw new Error('the event stream has no body');
      this.#armIdle(c);
      await readSse(res.body, {
        onEvent: (event) => {
          if (this.#controller !== c) return;
          this.#armIdle(c);
          if (event.event !== 'snapshot') return;
          const snapshot = parseSnapshot(event.data);
          this.#attempt = 0;
          if (this.#status.state !== 'live') this.#setStatus({ state: 'live', since_ms: this.#opts.now() });
          this.#opts.onSnapshot(snapshot);
        },
        onComment: () => {
          if (this.#controller === c) this.#armIdle(c);
        },
      });
      throw new Error('the event stream ended');
    } catch (err) {
      // superseded by reconnect() or close(): that caller owns what happens next
      if (this.#controller !== c) return;
      clearTimeout(this.#idleTimer);
      this.#controller = undefined;
      if (err instanceof UnauthorizedError) return this.#setStatus({ state: 'needs_key', reason: err.message });
      if (err instanceof ForbiddenError) return this.#setStatus({ state: 'forbidden', reason: err.message });
      const reason =
        c.signal.aborted && c.signal.reason instanceof Error
          ? c.signal.reason.message
          : err instanceof Error
            ? err.message
            : String(err);
      this.#attempt++;
      const delay = backoffDelay(this.#attempt, this.#opts.backoff);
      this.#setStatus({ state: 'retrying', attempt: this.#attempt, retry_at_ms: this.#opts.now() + delay, reason });
      this.#retryTimer = setTimeout(() => {
        this.#retryTimer = undefined;
        void this.#connect();
      }, delay);
    }
  }
}
