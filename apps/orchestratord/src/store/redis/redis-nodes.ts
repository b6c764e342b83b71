import { NodeRegisterRequestSchema, PoolSnapshotSchema, type NodeRegisterRequest, type NodeState, type PoolSnapshot } from '@llama-orch/contracts';
import { z } from 'zod';
import type { NodeLivenessStore, StoredNode } from '../node-liveness-store.js';
import { LuaScript, NOW_MS } from './lua-script.js';
import type { RedisConnection } from './redis-client.js';

// Keys: <p>nodes (set of ids), <p>nodes:live (sorted set: id → last seen, server ms, of nodes not
// offline), <p>node:<id> (hash: request, state, state_since, last_seen, pools — JSON where structured).

/** KEYS: nodes, nodes:live, node:<id>. ARGV: id, request json, pools json → now. */
const REGISTER = new LuaScript(
  'node-register',
  `${NOW_MS}local now = now_ms()
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'request', ARGV[2], 'state', 'registering', 'state_since', now, 'last_seen', now, 'pools', ARGV[3])
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], now, ARGV[1])
return now`,
);

/**
 * KEYS: nodes:live, node:<id>. ARGV: id, pools json, sent-at ms ('' = none), interval ms →
 * previous state, or false for an unknown node. The sent-at rule is liveness.ts's lastSeenOf.
 */
const HEARTBEAT = new LuaScript(
  'node-heartbeat',
  `${NOW_MS}local prev = redis.call('HGET', KEYS[2], 'state')
if not prev then return false end
local now = now_ms()
local seen = now
if ARGV[3] ~= '' then
  local sent = tonumber(ARGV[3])
  local plausible = math.min(tonumber(ARGV[4]) / 4, 1000)
  if sent <= now and now - sent <= plausible then seen = sent end
end
if prev ~= 'online' then redis.call('HSET', KEYS[2], 'state_since', now) end
redis.call('HSET', KEYS[2], 'state', 'online', 'last_seen', seen, 'pools', ARGV[2])
redis.call('ZADD', KEYS[1], seen, ARGV[1])
return prev`,
);

/** KEYS: nodes, nodes:live, node:<id>. ARGV: id → 1 removed, 0 unknown. */
const DEREGISTER = new LuaScript(
  'node-deregister',
  `redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[1], ARGV[1])
return redis.call('DEL', KEYS[3])`,
);

/**
 * KEYS: nodes:live. ARGV: key prefix, interval ms → ids marked offline by this call. Late = last
 * seen more than 3 intervals ago (strictly); a marked node leaves nodes:live, so no later sweep
 * (of any replica) returns it again until a heartbeat brings it back.
 */
const SWEEP = new LuaScript(
  'node-sweep',
  `${NOW_MS}local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - 3 * tonumber(ARGV[2])))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local key = ARGV[1] .. 'node:' .. id
  if redis.call('EXISTS', key) == 1 then redis.call('HSET', key, 'state', 'offline', 'state_since', now) end
end
return ids`,
);

const NodeStateSchema = z.enum(['registering', 'online', 'offline']);
const PoolsSchema = z.array(PoolSnapshotSchema);

export class RedisNodes implements NodeLivenessStore {
  readonly #redis: RedisConnection;
  readonly #intervalMs: number;

  constructor(redis: RedisConnection, heartbeatIntervalMs: number) {
    this.#redis = redis;
    this.#intervalMs = heartbeatIntervalMs;
  }

  #keys(nodeId: string): { all: string; live: string; node: string } {
    const p = this.#redis.prefix;
    return { all: `${p}nodes`, live: `${p}nodes:live`, node: `${p}node:${nodeId}` };
  }

  async register(req: NodeRegisterRequest): Promise<StoredNode> {
    const k = this.#keys(req.node_id);
    const now = (await this.#redis.eval(REGISTER, [k.all, k.live, k.node], [req.node_id, JSON.stringify(req), JSON.stringify(req.pools)])) as number;
    return { request: req, state: 'registering', stateSince: now, lastSeen: now, pools: req.pools };
  }

  async heartbeat(nodeId: string, pools: readonly PoolSnapshot[], sentAtMs: number | undefined): Promise<{ readonly previous: NodeState } | undefined> {
    const k = this.#keys(nodeId);
    const prev = await this.#redis.eval(HEARTBEAT, [k.live, k.node], [nodeId, JSON.stringify(pools), sentAtMs === undefined ? '' : Math.round(sentAtMs), this.#intervalMs]);
    return prev === null ? undefined : { previous: NodeStateSchema.parse(prev) };
  }

  async deregister(nodeId: string): Promise<boolean> {
    const k = this.#keys(nodeId);
    return (await this.#redis.eval(DEREGISTER, [k.all, k.live, k.node], [nodeId])) === 1;
  }

  async sweep(): Promise<string[]> {
    return (await this.#redis.eval(SWEEP, [this.#keys('').live], [this.#redis.prefix, this.#intervalMs])) as string[];
  }

  async get(nodeId: string): Promise<StoredNode | undefined> {
    const h = await this.#redis.call((c) => c.hgetall(this.#keys(nodeId).node), 'node get');
    return parseNode(h);
  }

  async list(): Promise<StoredNode[]> {
    const p = this.#redis.prefix;
    const ids = (await this.#redis.call((c) => c.smembers(`${p}nodes`), 'node list')).sort();
    if (ids.length === 0) return [];
    const rows = await this.#redis.call((c) => Promise.all(ids.map((id) => c.hgetall(`${p}node:${id}`))), 'node list');
    return rows.map(parseNode).filter((n): n is StoredNode => n !== undefined);
  }
}

/** A node hash as stored (validated: Redis is another process); undefined when gone. */
function parseNode(h: Record<string, string>): StoredNode | undefined {
  if (h.request === undefined) return undefined;
  return {
    request: NodeRegisterRequestSchema.parse(JSON.parse(h.request)),
    state: NodeStateSchema.parse(h.state),
    stateSince: Number(h.state_since),
    lastSeen: Number(h.last_seen),
    pools: PoolsSchema.parse(JSON.parse(h.pools ?? '[]')),
  };
}
