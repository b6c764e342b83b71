import {
  NodeMemorySchema,
  NodeRegisterRequestSchema,
  PoolSnapshotSchema,
  type NodeMemory,
  type NodeRegisterRequest,
  type NodeState,
  type PoolSnapshot,
} from '@llama-orch/contracts';
import { z } from 'zod';
import type { NodeLivenessStore, StoredNode } from '../node-liveness-store.js';
import type { RedisConnection } from './redis-client.js';
import type { RedisScripts } from './redis-scripts.js';

// Keys and scripts: lua/node-register.lua, node-heartbeat.lua, node-deregister.lua, node-sweep.lua.

const NodeStateSchema = z.enum(['registering', 'online', 'offline']);
const PoolsSchema = z.array(PoolSnapshotSchema);

export class RedisNodes implements NodeLivenessStore {
  readonly #redis: RedisConnection;
  readonly #scripts: RedisScripts;
  readonly #intervalMs: number;

  constructor(redis: RedisConnection, scripts: RedisScripts, heartbeatIntervalMs: number) {
    this.#redis = redis;
    this.#scripts = scripts;
    this.#intervalMs = heartbeatIntervalMs;
  }

  async register(req: NodeRegisterRequest): Promise<StoredNode> {
    const now = await this.#scripts.nodeRegister(req);
    return {
      request: req,
      state: 'registering',
      stateSince: now,
      lastSeen: now,
      pools: req.pools,
      ...(req.memory !== undefined ? { memory: req.memory } : {}),
    };
  }

  async heartbeat(
    nodeId: string,
    pools: readonly PoolSnapshot[],
    sentAtMs: number | undefined,
    memory?: NodeMemory,
  ): Promise<{ readonly previous: NodeState } | undefined> {
    const previous = await this.#scripts.nodeHeartbeat(nodeId, pools, sentAtMs, this.#intervalMs, memory);
    return previous === undefined ? undefined : { previous };
  }

  deregister(nodeId: string): Promise<boolean> {
    return this.#scripts.nodeDeregister(nodeId);
  }

  sweep(): Promise<string[]> {
    return this.#scripts.nodeSweep(this.#intervalMs);
  }

  async get(nodeId: string): Promise<StoredNode | undefined> {
    const h = await this.#redis.call((c) => c.hgetall(this.#scripts.keys.node(nodeId)), 'node get');
    return parseNode(h);
  }

  async list(): Promise<StoredNode[]> {
    const k = this.#scripts.keys;
    const ids = (await this.#redis.call((c) => c.smembers(k.nodes), 'node list')).sort();
    if (ids.length === 0) return [];
    const rows = await this.#redis.call((c) => Promise.all(ids.map((id) => c.hgetall(k.node(id)))), 'node list');
    return rows.map(parseNode).filter((n): n is StoredNode => n !== undefined);
  }
}

/** A node hash as stored (validated: Redis is another process); undefined when gone. */
function parseNode(h: Record<string, string>): StoredNode | undefined {
  if (h.request === undefined) return undefined;
  const request = NodeRegisterRequestSchema.parse(JSON.parse(h.request));
  // A heartbeat's report, else the registration's.
  const memory = h.memory === undefined ? request.memory : NodeMemorySchema.parse(JSON.parse(h.memory));
  return {
    request,
    state: NodeStateSchema.parse(h.state),
    stateSince: Number(h.state_since),
    lastSeen: Number(h.last_seen),
    pools: PoolsSchema.parse(JSON.parse(h.pools ?? '[]')),
    ...(memory !== undefined ? { memory } : {}),
  };
}
