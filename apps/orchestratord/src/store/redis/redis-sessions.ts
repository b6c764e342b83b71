import type { SessionInfo } from '@llama-orch/contracts';
import type { SessionAffinityStore, SessionLimits } from '../session-affinity-store.js';
import type { RedisConnection } from './redis-client.js';
import type { RedisScripts, ScriptSessionLimits } from './redis-scripts.js';

/**
 * A session with active tasks does not expire by its TTL, but a replica that died while running
 * one never says it ended: past this cap such a session expires anyway, ms.
 */
export const ACTIVE_SESSION_CAP_MS = 24 * 3_600_000;

/** The limits the session functions of the scripts take (lua/includes/session.lua). */
export function sessionScriptLimits(limits: SessionLimits): ScriptSessionLimits {
  return { ttlMs: limits.ttlMs, capMs: Math.max(ACTIVE_SESSION_CAP_MS, limits.ttlMs), tokenBudget: limits.tokenBudget };
}

/** Sessions in Redis. Unlike the in-process store there is no `maxSessions` cap: idle sessions expire by TTL (bound memory with Redis's maxmemory). */
export class RedisSessions implements SessionAffinityStore {
  readonly #redis: RedisConnection;
  readonly #scripts: RedisScripts;
  readonly #limits: SessionLimits;

  constructor(redis: RedisConnection, scripts: RedisScripts, limits: SessionLimits) {
    this.#redis = redis;
    this.#scripts = scripts;
    this.#limits = limits;
  }

  async get(id: string): Promise<SessionInfo | undefined> {
    const s = await this.#scripts.sessionRead(id);
    if (s === undefined) return undefined;
    const ttl = s.active > 0 ? this.#limits.ttlMs : Math.max(0, s.pttl);
    const info: SessionInfo = {
      session_id: id,
      ttl_ms_remaining: Math.round(ttl),
      turns: s.turns,
      tokens_out: s.tokensOut,
      active_tasks: s.active,
    };
    if (this.#limits.tokenBudget !== undefined) info.tokens_budget_remaining = this.#limits.tokenBudget - s.tokensOut;
    return info;
  }

  async delete(id: string): Promise<boolean> {
    return (await this.#redis.call((c) => c.del(this.#scripts.keys.session(id)), 'session delete')) === 1;
  }
}
