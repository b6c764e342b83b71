import type { SessionInfo } from '@llama-orch/contracts';
import type { Clock } from '@llama-orch/daemon-support';
import type { SessionAffinityStore, SessionLimits, SessionPoolRef } from '../../store/session-affinity-store.js';

interface SessionRecord {
  lastActive: number;
  turns: number;
  tokensOut: number;
  active: number;
  pool: SessionPoolRef | undefined;
}

/**
 * Sessions in memory (the reference model of `SessionAffinityStore`; the semantics of `sessions/session-store.ts`). The map is kept in
 * order of last activity (a touched session is re-inserted), so eviction takes idle ones from the
 * front; an expired session is dropped when it is next read or when room is made.
 */
export class ReferenceSessions implements SessionAffinityStore {
  readonly #sessions = new Map<string, SessionRecord>();
  readonly #limits: SessionLimits;
  readonly #clock: Clock;

  constructor(limits: SessionLimits, clock: Clock) {
    this.#limits = limits;
    this.#clock = clock;
  }

  #live(id: string, now: number): SessionRecord | undefined {
    const s = this.#sessions.get(id);
    if (s !== undefined && s.active === 0 && now - s.lastActive >= this.#limits.ttlMs) {
      this.#sessions.delete(id);
      return undefined;
    }
    return s;
  }

  /** A task of the session was admitted, synchronously (for the reference lifecycle's one-step admission). */
  startedNow(id: string): void {
    const now = this.#clock.now();
    let s = this.#live(id, now);
    if (s === undefined) {
      s = { lastActive: now, turns: 0, tokensOut: 0, active: 0, pool: undefined };
      if (this.#sessions.size >= this.#limits.maxSessions) this.#makeRoom();
    } else {
      this.#sessions.delete(id);
    }
    s.active += 1;
    s.lastActive = now;
    this.#sessions.set(id, s);
  }

  /** A task of the session ended, synchronously; `tokensOut` undefined when it ended with an error; `pool` becomes the affinity. */
  endedNow(id: string, tokensOut: number | undefined, pool?: SessionPoolRef): void {
    const s = this.#sessions.get(id);
    if (s === undefined) return; // deleted while the task ran
    if (pool !== undefined) s.pool = { node_id: pool.node_id, pool_id: pool.pool_id };
    s.active = Math.max(0, s.active - 1);
    s.lastActive = this.#clock.now();
    this.#sessions.delete(id);
    this.#sessions.set(id, s);
    if (tokensOut !== undefined) {
      s.turns += 1;
      s.tokensOut += tokensOut;
    }
  }

  /** The pool the session's next turn should prefer; undefined for a new or expired session. */
  lastPoolNow(id: string): SessionPoolRef | undefined {
    return this.#live(id, this.#clock.now())?.pool;
  }

  /** Tokens left in the session's budget; undefined = unlimited. */
  budgetRemainingNow(id: string): number | undefined {
    const budget = this.#limits.tokenBudget;
    return budget === undefined ? undefined : budget - (this.#live(id, this.#clock.now())?.tokensOut ?? 0);
  }

  get(id: string): Promise<SessionInfo | undefined> {
    const now = this.#clock.now();
    const s = this.#live(id, now);
    if (s === undefined) return Promise.resolve(undefined);
    const ttl = s.active > 0 ? this.#limits.ttlMs : Math.max(0, this.#limits.ttlMs - (now - s.lastActive));
    const info: SessionInfo = {
      session_id: id,
      ttl_ms_remaining: Math.round(ttl),
      turns: s.turns,
      tokens_out: s.tokensOut,
      active_tasks: s.active,
    };
    if (this.#limits.tokenBudget !== undefined) info.tokens_budget_remaining = this.#limits.tokenBudget - s.tokensOut;
    return Promise.resolve(info);
  }

  delete(id: string): Promise<boolean> {
    return Promise.resolve(this.#live(id, this.#clock.now()) !== undefined && this.#sessions.delete(id));
  }

  /** Evicts idle sessions, oldest activity first, until one more fits (or only active ones are left). */
  #makeRoom(): void {
    for (const [id, s] of this.#sessions) {
      if (this.#sessions.size < this.#limits.maxSessions) return;
      if (s.active === 0) this.#sessions.delete(id);
    }
  }
}
