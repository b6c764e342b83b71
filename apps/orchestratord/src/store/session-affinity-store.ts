import type { SessionInfo } from '@llama-orch/contracts';

/** A pool of a node, as a session remembers it. */
export interface SessionPoolRef {
  readonly node_id: string;
  readonly pool_id: string;
}

export interface SessionLimits {
  readonly ttlMs: number;
  /** Sessions kept at most (in-process store only); past it a new one evicts the least recently active idle one. */
  readonly maxSessions: number;
  /** Tokens per session; undefined = unlimited. */
  readonly tokenBudget: number | undefined;
}

/**
 * Session metadata and affinity, shared by every replica (the twin of `sessions/session-store.ts`,
 * whose semantics it keeps): created by the first task that names it, expired `ttlMs` after its
 * last activity unless a task of it is active; `turns` and `tokens_out` count tasks that ended with
 * an `end` frame; the pool of the last such turn is where the next turn prefers to run.
 */
export interface SessionAffinityStore {
  /** A task of the session was admitted. */
  taskStarted(id: string): Promise<void>;
  /** A task of the session ended; `tokensOut` undefined when it ended with an error; `pool` becomes the affinity. */
  taskEnded(id: string, tokensOut: number | undefined, pool?: SessionPoolRef): Promise<void>;
  /** The pool the session's next turn should prefer; undefined for a new or expired session. */
  lastPool(id: string): Promise<SessionPoolRef | undefined>;
  /** Tokens left in the session's budget; undefined = unlimited. */
  budgetRemaining(id: string): Promise<number | undefined>;
  get(id: string): Promise<SessionInfo | undefined>;
  delete(id: string): Promise<boolean>;
}
