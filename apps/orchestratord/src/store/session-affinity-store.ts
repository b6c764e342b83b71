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
 * an `end` frame; the pool of the last such turn is where the next turn prefers to run. A turn
 * starts with its task's admission, where its pool and budget are read, and ends with its finish
 * (`TaskLifecycleStore.admit`, `finish`); this interface holds the session routes' read and delete.
 */
export interface SessionAffinityStore {
  /** The session as `GET /v2/sessions/{id}` answers it; undefined for an unknown or expired one. */
  get(id: string): Promise<SessionInfo | undefined>;
  /** Forgets the session (a task of it still running does not bring it back); false when unknown. */
  delete(id: string): Promise<boolean>;
}
