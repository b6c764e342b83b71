import type { NodeRegisterRequest } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { NodeRegistry, type RegistryEvent } from './node-registry.js';
import { isPlaceable } from './placement.js';
import { captureLogger, ManualClock, snapshot } from './test-helpers.js';

const reg = (nodeId: string, pools = [snapshot({ pool_id: 'p' })]): NodeRegisterRequest => ({
  node_id: nodeId, machine_id: nodeId, address: `http://${nodeId}.invalid:9200`, pools,
  capabilities: { gpus: [], cpu_cores: 2, ram_total_bytes: 1024 }, version: 't',
});
const hb = (pools = [snapshot({ pool_id: 'p' })]) => ({ timestamp: new Date().toISOString(), pools });

describe('NodeRegistry', () => {
  const registries: NodeRegistry[] = [];
  const make = (clock: ManualClock, intervalMs = 1000) => {
    const r = new NodeRegistry({ heartbeatIntervalMs: intervalMs, clock, logger: captureLogger().logger });
    registries.push(r);
    return r;
  };
  afterEach(async () => {
    await Promise.all(registries.splice(0).map((r) => r.close()));
  });

  it('registering → online on first heartbeat → offline after 3 missed intervals → online again', () => {
    const clock = new ManualClock();
    const r = make(clock);
    const events: RegistryEvent['type'][] = [];
    r.subscribe((e) => events.push(e.type));
    expect(r.register(reg('n1'))).toEqual({ next_heartbeat_ms: 1000 });
    expect(r.nodeState('n1')).toBe('registering');
    expect(r.pools().some(isPlaceable)).toBe(false);
    r.heartbeat('n1', hb());
    expect(r.nodeState('n1')).toBe('online');
    expect(r.pools().some(isPlaceable)).toBe(true);
    clock.advance(3000);
    r.sweep();
    expect(r.nodeState('n1')).toBe('online');
    clock.advance(1);
    r.sweep();
    expect(r.nodeState('n1')).toBe('offline');
    expect(r.pools()).toHaveLength(1);
    expect(r.pools().some(isPlaceable)).toBe(false);
    r.heartbeat('n1', hb());
    expect(r.nodeState('n1')).toBe('online');
    expect(events).toEqual(['registered', 'online', 'heartbeat', 'offline', 'online', 'heartbeat']);
  });

  it('answers undefined (→ 404, re-register) to heartbeats of unknown nodes and forgets deregistered ones', () => {
    const r = make(new ManualClock());
    expect(r.heartbeat('ghost', hb())).toBeUndefined();
    r.register(reg('n1'));
    expect(r.deregister('n1')).toBe(true);
    expect(r.deregister('n1')).toBe(false);
    expect(r.heartbeat('n1', hb())).toBeUndefined();
    expect(r.pools()).toEqual([]);
  });

  it('the sweep timer marks silent nodes offline on its own', async () => {
    const r = new NodeRegistry({ heartbeatIntervalMs: 50, clock: { now: () => Date.now() }, logger: captureLogger().logger });
    registries.push(r);
    r.register(reg('n1'));
    r.heartbeat('n1', hb());
    const started = Date.now();
    while (r.nodeState('n1') === 'online' && Date.now() - started < 5000) await new Promise((res) => setTimeout(res, 10));
    expect(r.nodeState('n1')).toBe('offline');
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
  });

  it('leases: N tasks on one slot get one lease until it is released', () => {
    const r = make(new ManualClock());
    r.register(reg('n1'));
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', slots_total: 1, slots_free: 1 })]));
    const granted = [];
    for (let i = 0; i < 5; i += 1) {
      const view = r.pools().find(isPlaceable);
      if (view) granted.push(r.lease(view.node_id, view.pool_id));
    }
    expect(granted).toHaveLength(1);
    expect(r.pools()[0]).toMatchObject({ free: 0, leased: 1 });
    granted[0]?.release();
    granted[0]?.release(); // idempotent
    expect(r.pools()[0]).toMatchObject({ free: 1, leased: 0 });
  });

  it('a heartbeat that reports our own leases as busy does not count them twice', () => {
    const r = make(new ManualClock());
    r.register(reg('n1'));
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', slots_total: 4, slots_free: 4 })]));
    const l1 = r.lease('n1', 'p');
    r.lease('n1', 'p');
    expect(r.pools()[0]?.free).toBe(2);
    // The node now reports our 2 dispatches as busy.
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', slots_total: 4, slots_free: 2 })]));
    expect(r.pools()[0]?.free).toBe(2);
    // Releasing a lease frees its slot at once, without waiting for the next heartbeat.
    l1.release();
    expect(r.pools()[0]?.free).toBe(3);
    // Slots busy for reasons other than our leases stay unavailable.
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', slots_total: 4, slots_free: 1 })]));
    expect(r.pools()[0]?.free).toBe(1);
  });

  it('a heartbeat sent before our dispatch arrived (reports it free) does not free our lease', () => {
    const r = make(new ManualClock());
    r.register(reg('n1'));
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', slots_total: 1, slots_free: 1 })]));
    r.lease('n1', 'p');
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', slots_total: 1, slots_free: 1 })]));
    expect(r.pools()[0]?.free).toBe(0);
  });

  it('saturation after a 503 lasts until the next heartbeat or saturationMs', () => {
    const clock = new ManualClock();
    const r = make(clock, 1000);
    r.register(reg('n1'));
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', slots_total: 2, slots_free: 2 })]));
    r.markSaturated('n1', 'p');
    expect(r.pools()[0]?.free).toBe(0);
    clock.advance(501);
    expect(r.pools()[0]?.free).toBe(2);
    r.markSaturated('n1', 'p');
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', slots_total: 2, slots_free: 2 })]));
    expect(r.pools()[0]?.free).toBe(2);
  });

  it('a failed dispatch makes the pool (or, when unreachable, the whole node) suspect until its next heartbeat', () => {
    const clock = new ManualClock();
    const r = make(clock);
    const pools = [snapshot({ pool_id: 'a' }), snapshot({ pool_id: 'b' })];
    r.register(reg('n1', pools));
    r.heartbeat('n1', hb(pools));
    r.markSuspect('n1', 'a');
    expect(r.pools().map((p) => p.free)).toEqual([0, 1]);
    clock.advance(60_000); // no time limit: a dead node never heartbeats again
    expect(r.pools().map((p) => p.free)).toEqual([0, 1]);
    r.heartbeat('n1', hb(pools));
    expect(r.pools().map((p) => p.free)).toEqual([1, 1]);
    r.markSuspect('n1', 'a', true);
    expect(r.pools().map((p) => p.free)).toEqual([0, 0]);
  });

  it('a forwarded drain makes the pool unplaceable until a heartbeat speaks', () => {
    const r = make(new ManualClock());
    r.register(reg('n1'));
    r.heartbeat('n1', hb());
    r.markDraining('n1', 'p');
    expect(r.pools()[0]?.draining).toBe(true);
    expect(r.pools().some(isPlaceable)).toBe(false);
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', state: 'draining', draining: true })]));
    expect(r.pools()[0]?.draining).toBe(true);
  });

  it('derives a provisioning ETA from heartbeat progress speed', () => {
    const clock = new ManualClock();
    const r = make(clock);
    r.register(reg('n1', [snapshot({ pool_id: 'p', state: 'provisioning', ready: false, progress: { engine: 0.2, model: 0 } })]));
    expect(r.pools()[0]?.provisioningEtaMs).toBeUndefined();
    clock.advance(1000);
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', state: 'provisioning', ready: false, progress: { engine: 0.4, model: 0.2 } })]));
    // progress 0.1 → 0.3 in 1 s: 0.7 left at 0.2/s = 3.5 s.
    expect(r.pools()[0]?.provisioningEtaMs).toBe(3500);
  });

  it('lists nodes with their state and pools; close() is idempotent', async () => {
    const r = make(new ManualClock());
    r.register(reg('n2'));
    r.register(reg('n1'));
    expect(r.list().map((n) => [n.node_id, n.state])).toEqual([['n1', 'registering'], ['n2', 'registering']]);
    await r.close();
    await r.close();
    expect(r.state).toBe('closed');
  });
});
