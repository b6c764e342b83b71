import { describe, expect, it } from 'vitest';
import { ClusterPoolSchema, PoolFactsSchema, PoolSnapshotSchema, PoolStatusSchema } from './index.js';

const facts = {
  pool_id: 'p0', state: 'ready', ready: true, draining: false, slots_total: 2, slots_free: 1,
  models: ['m'], engine_version: 'b1', ctx: 4096, deterministic: false, decode_tps: 10,
} as const;

describe('pool views (one base: PoolFactsSchema)', () => {
  it('the heartbeat snapshot is exactly the facts', () => {
    expect(Object.keys(PoolSnapshotSchema.shape)).toEqual(Object.keys(PoolFactsSchema.shape));
    expect(PoolSnapshotSchema.safeParse(facts).success).toBe(true);
  });

  it('every view stays strict and keeps the shared bounds', () => {
    const status = {
      ...facts, live: true, active_leases: 1, restarts: 0, breaker: 'closed', updated_at: '2026-01-01T00:00:00.000Z',
    };
    const { ctx: _c, deterministic: _d, decode_tps: _t, ...forCluster } = facts;
    const cluster = { ...forCluster, node_id: 'n1', node_state: 'online', leased: 0 };
    for (const [schema, value] of [[PoolSnapshotSchema, facts], [PoolStatusSchema, status], [ClusterPoolSchema, cluster]] as const) {
      expect(schema.safeParse(value).success).toBe(true);
      expect(schema.safeParse({ ...value, colour: 'blue' }).success).toBe(false);
      expect(schema.safeParse({ ...value, last_error: 'x'.repeat(4097) }).success).toBe(false);
      expect(schema.safeParse({ ...value, models: Array.from({ length: 65 }, () => 'm') }).success).toBe(false);
    }
    // pool-managerd's status has no engine before the first start; the other views always name one.
    const { engine_version: _e, ...noEngine } = status;
    expect(PoolStatusSchema.safeParse(noEngine).success).toBe(true);
    expect(ClusterPoolSchema.safeParse({ ...cluster, engine_version: undefined }).success).toBe(false);
  });
});
