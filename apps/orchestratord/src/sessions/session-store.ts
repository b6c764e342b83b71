import type { SessionInfo } from '@llama-orch/contracts';
import type { Clock } from '@llama-orch/daemon-support';

/**
 * Session metadata (no prompts or outputs): created by the first task that names it, kept alive by
 * activity, expired `ttlMs` after the last activity unless a task of it is still active. Tokens
 * spent are the sum of `end.tokens_out`; `turns` counts tasks that ended with an `end` frame.
 * With a token budget, admission refuses tasks of a session whose budget is spent.
 *
 * At most `maxSessions` are kept: a new session past it evicts the least recently active idle one
 * (no active task), so a flood of unique session ids cannot grow memory for a whole TTL. The map is
 * kept in order of last activity (a touched session is re-inserted), so the oldest idle one is
 * found from the front. Sessions with active tasks are never evicted; there are at most as many
 * as tasks admitted and not ended. An evicted session that comes back starts afresh (its spent
 * budget too): size the cap above the sessions a TTL really holds.
 */
interface SessionRecord {
  lastActive: number;
  turns: number;
  tokensOut: number;
  active: number;
  /** The pool that ran the session's last turn to its end: its KV cache holds the conversation. */
  pool: SessionPool | undefined;
}

/** A pool of a node, as the session remembers it. */
export interface SessionPool {
  readonly node_id: string;
  readonly pool_id: string;
}

export interface SessionStoreOptions {
  ttlMs: number;
  /** Sessions kept at most (idle ones past it are evicted, least recently active first). */
  maxSessions: number;
  /** Called once per evicted session (a metric). */
  onEvict?: () => void;
  /** Tokens per session; undefined = unlimited. */
  tokenBudget: number | undefined;
  clock: Clock;
}

export type SessionStoreState = 'running' | 'closed';

export class SessionStore {
  readonly #sessions = new Map<string, SessionRecord>();
  readonly #ttlMs: number;
  readonly #maxSessions: number;
  readonly #tokenBudget: number | undefined;
  readonly #onEvict: (() => void) | undefined;
  readonly #clock: Clock;
  readonly #sweep: NodeJS.Timeout;
  #state: SessionStoreState = 'running';
  /** Where eviction goes on (see #makeRoom). */
  #cursor: Iterator<[string, SessionRecord]> | undefined;

  constructor({ ttlMs, maxSessions, tokenBudget, onEvict, clock }: SessionStoreOptions) {
    this.#ttlMs = ttlMs;
    this.#maxSessions = maxSessions;
    this.#tokenBudget = tokenBudget;
    this.#onEvict = onEvict;
    this.#clock = clock;
    this.#sweep = setInterval(() => this.sweep(), Math.max(1000, Math.floor(ttlMs / 2)));
    this.#sweep.unref();
  }

  get state(): SessionStoreState {
    return this.#state;
  }

  #live(id: string): SessionRecord | undefined {
    const s = this.#sessions.get(id);
    if (s === undefined) return undefined;
    if (s.active === 0 && this.#clock.now() - s.lastActive >= this.#ttlMs) {
      this.#sessions.delete(id);
      return undefined;
    }
    return s;
  }

  /** Tokens left in the session's budget; undefined = unlimited. */
  budgetRemaining(id: string): number | undefined {
    if (this.#tokenBudget === undefined) return undefined;
    return this.#tokenBudget - (this.#live(id)?.tokensOut ?? 0);
  }

  /** A task of the session was admitted. */
  taskStarted(id: string): void {
    const now = this.#clock.now();
    let s = this.#live(id);
    if (s === undefined) {
      s = { lastActive: now, turns: 0, tokensOut: 0, active: 0, pool: undefined };
      if (this.#sessions.size >= this.#maxSessions) this.#makeRoom();
    } else {
      this.#sessions.delete(id);
    }
    s.active += 1;
    s.lastActive = now;
    this.#sessions.set(id, s);
  }

  get size(): number {
    return this.#sessions.size;
  }

  /**
   * Evicts idle sessions, oldest first, until one more fits (or only active ones are left). The
   * cursor is kept between calls, so each call resumes where the last one stopped instead of
   * stepping again over the entries deleted at the front. Map iterators are live, so sessions
   * touched meanwhile (moved to the back) come up again later.
   */
  #makeRoom(): void {
    let restarted = false;
    while (this.#sessions.size >= this.#maxSessions) {
      this.#cursor ??= this.#sessions.entries();
      const next = this.#cursor.next();
      if (next.done === true) {
        this.#cursor = undefined;
        if (restarted) return; // a whole pass found only active sessions
        restarted = true;
        continue;
      }
      const [id, s] = next.value;
      if (s.active > 0) continue;
      this.#sessions.delete(id);
      this.#onEvict?.();
    }
  }

  /**
   * The pool the session's next turn should prefer (prompt-cache affinity): where its last turn
   * ended normally, while the session lives; undefined for a new session.
   */
  lastPool(id: string): SessionPool | undefined {
    return this.#sessions.get(id)?.pool;
  }

  /**
   * A task of the session ended; `tokensOut` from its `end` frame, undefined when it ended with an
   * error. `pool`: where an `end` task ran (the session's affinity from now on).
   */
  taskEnded(id: string, tokensOut: number | undefined, pool?: SessionPool): void {
    const s = this.#sessions.get(id);
    if (s === undefined) return; // deleted while the task ran
    if (pool !== undefined) s.pool = pool;
    s.active = Math.max(0, s.active - 1);
    s.lastActive = this.#clock.now();
    this.#sessions.delete(id);
    this.#sessions.set(id, s);
    if (tokensOut !== undefined) {
      s.turns += 1;
      s.tokensOut += tokensOut;
    }
  }

  get(id: string): SessionInfo | undefined {
    const s = this.#live(id);
    if (s === undefined) return undefined;
    const ttl = s.active > 0 ? this.#ttlMs : Math.max(0, this.#ttlMs - (this.#clock.now() - s.lastActive));
    const info: SessionInfo = {
      session_id: id,
      ttl_ms_remaining: Math.round(ttl),
      turns: s.turns,
      tokens_out: s.tokensOut,
      active_tasks: s.active,
    };
    const budget = this.budgetRemaining(id);
    if (budget !== undefined) info.tokens_budget_remaining = budget;
    return info;
  }

  delete(id: string): boolean {
    return this.#live(id) !== undefined && this.#sessions.delete(id);
  }

  sweep(): void {
    for (const id of [...this.#sessions.keys()]) this.#live(id);
  }

  close(): Promise<void> {
    if (this.#state === 'running') {
      this.#state = 'closed';
      clearInterval(this.#sweep);
    }
    return Promise.resolve();
  }
}
