import type { SessionInfo } from '@llama-orch/contracts';
import type { SessionAffinityStore, SessionLimits, SessionPoolRef } from '../session-affinity-store.js';
import { LuaScript, NOW_MS } from './lua-script.js';
import type { RedisConnection } from './redis-client.js';

/**
 * A session with active tasks does not expire by its TTL, but a replica that died while running
 * one never says it ended: past this cap such a session expires anyway, ms.
 */
export const ACTIVE_SESSION_CAP_MS = 24 * 3_600_000;

// <prefix>session:<id>, a hash: turns, tokens_out, active, last_active, node_id, pool_id.
// Idle: the key expires ttl after the last activity; active: ACTIVE_SESSION_CAP_MS after it.
// These functions are also part of the task lifecycle scripts (admit-script.ts, end-script.ts);
// they need NOW_MS before them.
export const SESSION_LUA = `local function session_started(key, cap_ms)
  redis.call('HSETNX', key, 'turns', 0)
  redis.call('HSETNX', key, 'tokens_out', 0)
  redis.call('HINCRBY', key, 'active', 1)
  redis.call('HSET', key, 'last_active', now_ms())
  redis.call('PEXPIRE', key, cap_ms)
end
-- tokens_out '' = ended with an error; pool_id '' = keep the affinity.
local function session_ended(key, tokens_out, node_id, pool_id, ttl_ms, cap_ms)
  if redis.call('EXISTS', key) == 0 then return 0 end
  if pool_id ~= '' then redis.call('HSET', key, 'node_id', node_id, 'pool_id', pool_id) end
  local active = math.max(0, tonumber(redis.call('HGET', key, 'active') or '0') - 1)
  redis.call('HSET', key, 'active', active, 'last_active', now_ms())
  if tokens_out ~= '' then
    redis.call('HINCRBY', key, 'turns', 1)
    redis.call('HINCRBY', key, 'tokens_out', tokens_out)
  end
  if active == 0 then redis.call('PEXPIRE', key, ttl_ms) else redis.call('PEXPIRE', key, cap_ms) end
  return 1
end
`;

/** KEYS[1] = the session; ARGV: active cap ms. */
const STARTED = new LuaScript(
  'session-started',
  `${NOW_MS}${SESSION_LUA}session_started(KEYS[1], ARGV[1])
return 1`,
);

/** ARGV: tokens out ('' = ended with an error), node id, pool id ('' = keep), ttl ms, active cap ms. */
const ENDED = new LuaScript('session-ended', `${NOW_MS}${SESSION_LUA}return session_ended(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])`);

/** → {turns, tokens_out, active, node_id, pool_id, pttl} or {} when gone. */
const READ = new LuaScript(
  'session-read',
  `local h = redis.call('HMGET', KEYS[1], 'turns', 'tokens_out', 'active', 'node_id', 'pool_id')
if not h[1] then return {} end
return {h[1], h[2], h[3], h[4] or '', h[5] or '', redis.call('PTTL', KEYS[1])}`,
);

interface SessionRow {
  turns: number;
  tokensOut: number;
  active: number;
  pool: SessionPoolRef | undefined;
  pttl: number;
}

/** Sessions in Redis. Unlike the in-process store there is no `maxSessions` cap: idle sessions expire by TTL (bound memory with Redis's maxmemory). */
export class RedisSessions implements SessionAffinityStore {
  readonly #redis: RedisConnection;
  readonly #limits: SessionLimits;

  constructor(redis: RedisConnection, limits: SessionLimits) {
    this.#redis = redis;
    this.#limits = limits;
  }

  #key(id: string): string {
    return `${this.#redis.prefix}session:${id}`;
  }

  #cap(): number {
    return Math.max(ACTIVE_SESSION_CAP_MS, this.#limits.ttlMs);
  }

  async #read(id: string): Promise<SessionRow | undefined> {
    const r = (await this.#redis.eval(READ, [this.#key(id)], [])) as (string | number)[];
    if (r.length === 0) return undefined;
    const [turns, tokensOut, active, nodeId, poolId, pttl] = r;
    return {
      turns: Number(turns),
      tokensOut: Number(tokensOut),
      active: Number(active),
      pool: poolId === '' ? undefined : { node_id: String(nodeId), pool_id: String(poolId) },
      pttl: Number(pttl),
    };
  }

  async taskStarted(id: string): Promise<void> {
    await this.#redis.eval(STARTED, [this.#key(id)], [this.#cap()]);
  }

  async taskEnded(id: string, tokensOut: number | undefined, pool?: SessionPoolRef): Promise<void> {
    await this.#redis.eval(ENDED, [this.#key(id)], [tokensOut ?? '', pool?.node_id ?? '', pool?.pool_id ?? '', this.#limits.ttlMs, this.#cap()]);
  }

  async lastPool(id: string): Promise<SessionPoolRef | undefined> {
    return (await this.#read(id))?.pool;
  }

  async budgetRemaining(id: string): Promise<number | undefined> {
    const budget = this.#limits.tokenBudget;
    if (budget === undefined) return undefined;
    return budget - ((await this.#read(id))?.tokensOut ?? 0);
  }

  async get(id: string): Promise<SessionInfo | undefined> {
    const s = await this.#read(id);
    if (s === undefined) return undefined;
    const ttl = s.active > 0 ? this.#limits.ttlMs : Math.max(0, s.pttl);
    const info: SessionInfo = { session_id: id, ttl_ms_remaining: Math.round(ttl), turns: s.turns, tokens_out: s.tokensOut, active_tasks: s.active };
    if (this.#limits.tokenBudget !== undefined) info.tokens_budget_remaining = this.#limits.tokenBudget - s.tokensOut;
    return info;
  }

  async delete(id: string): Promise<boolean> {
    return (await this.#redis.call((c) => c.del(this.#key(id)), 'session delete')) === 1;
  }
}
