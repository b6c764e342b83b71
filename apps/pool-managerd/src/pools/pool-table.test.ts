import { describe, expect, it } from 'vitest';
import { PoolNotFoundError, PoolUnreadyError, ReplicaExhaustedError } from '../errors.js';
import { PoolTable } from './pool-table.js';

function readyRegistry(slots = 2): PoolTable {
  const r = new PoolTable();
  r.register('b', { managed: true, models: ['m'], deterministic: false, ctx: 512, slotsTotal: slots });
  r.transition('b', 'starting');
  r.bindEngine('b', {
    url: 'http://127.0.0.1:1',
    replica_id: 'r0',
    engine_version: 'b1-x',
    slots_total: slots,
    ctx: 512,
    mode: 'managed',
  });
  r.transition('b', 'ready', 'healthy');
  return r;
}

describe('PoolTable', () => {
  it('registers once and is ready only with an engine in state ready', () => {
    const r = new PoolTable();
    expect(r.register('a', { managed: true, models: ['m'], deterministic: true, ctx: 256, slotsTotal: 1 })).toBe(true);
    expect(r.register('a', { managed: true, models: ['x'], deterministic: false, ctx: 1, slotsTotal: 9 })).toBe(false);
    expect(r.status('a')).toMatchObject({
      state: 'provisioning',
      ready: false,
      live: false,
      slots_free: 0,
      models: ['m'],
    });
    r.transition('a', 'starting');
    expect(() => r.transition('a', 'ready')).not.toThrow();
    expect(r.status('a').ready).toBe(false); // no engine bound: never ready because of a state alone
  });

  it('leases slots, refuses when full, never goes negative on double release', () => {
    const r = readyRegistry(2);
    const l1 = r.lease('b');
    const l2 = r.lease('b');
    expect(r.status('b')).toMatchObject({ slots_free: 0, active_leases: 2 });
    expect(() => r.lease('b')).toThrow(ReplicaExhaustedError);
    l1.release();
    l1.release();
    expect(r.activeLeases('b')).toBe(1);
    l2.release();
    l2.release();
    expect(r.status('b')).toMatchObject({ slots_free: 2, active_leases: 0 });
  });

  it('draining refuses new leases but releases still work', () => {
    const r = readyRegistry(2);
    const l = r.lease('b');
    r.transition('b', 'draining', 'drain');
    expect(() => r.lease('b')).toThrow(expect.objectContaining({ errorCode: 'POOL_UNREADY' }));
    expect(r.status('b')).toMatchObject({ draining: true, ready: false, slots_free: 0 });
    l.release();
    expect(r.activeLeases('b')).toBe(0);
  });

  it('abortLeases signals holders; unbind makes the pool not ready', () => {
    const r = readyRegistry(1);
    const l = r.lease('b');
    r.abortLeases('b', 'stop');
    expect(l.signal.aborted).toBe(true);
    r.unbindEngine('b');
    expect(r.status('b')).toMatchObject({ ready: false, live: false });
    expect(r.status('b').engine_version).toBeUndefined();
  });

  it('snapshots are sorted, carry last_error, and unknown pools throw', () => {
    const r = readyRegistry(1);
    r.register('a', { managed: false, models: ['z'], deterministic: false, ctx: 1, slotsTotal: 1, state: 'stopped' });
    r.setLastError('a', 'boom');
    const snaps = r.snapshots();
    expect(snaps.map((s) => s.pool_id)).toEqual(['a', 'b']);
    expect(snaps[0]).toMatchObject({ ready: false, last_error: 'boom', engine_version: '' });
    expect(snaps[1]).toMatchObject({ ready: true, slots_free: 1, engine_version: 'b1-x' });
    expect(() => r.status('nope')).toThrow(PoolNotFoundError);
    expect(() => r.lease('nope')).toThrow(PoolNotFoundError);
  });

  it('snapshots carry the configured aliases, and none when there are none', () => {
    const r = readyRegistry(1);
    r.register('a', {
      managed: true,
      models: ['synthetic:llama'],
      aliases: ['synthetic', 'tiny'],
      deterministic: false,
      ctx: 1,
      slotsTotal: 1,
    });
    r.setModels('a', ['synthetic:llama', 'synthetic-llama-0123456789ab']);
    const [a, b] = r.snapshots();
    expect(a).toMatchObject({
      pool_id: 'a',
      models: ['synthetic:llama', 'synthetic-llama-0123456789ab'],
      aliases: ['synthetic', 'tiny'],
    });
    expect(b?.pool_id).toBe('b');
    expect(b && 'aliases' in b).toBe(false);
    // pool-managerd's own GET /v2/pools shows them too.
    expect(r.status('a')).toMatchObject({ aliases: ['synthetic', 'tiny'] });
    expect('aliases' in r.status('b')).toBe(false);
  });

  it('decode rate is a moving average of finished streams', () => {
    const r = readyRegistry(1);
    r.recordDecode('b', 100, 50); // 2000 tok/s
    expect(r.status('b').decode_tps).toBeCloseTo(2000);
    r.recordDecode('b', 100, 100); // 1000 tok/s
    expect(r.status('b').decode_tps).toBeCloseTo(1700);
    r.recordDecode('b', 0, 100);
    expect(r.status('b').decode_tps).toBeCloseTo(1700);
  });

  it('idle_since: absent until first ready, set then (injected clock), cleared by a lease, set again at the last release', () => {
    let now = Date.parse('2026-01-01T00:00:00.000Z');
    const r = new PoolTable({ clock: { now: () => now } });
    r.register('b', { managed: true, models: ['m'], deterministic: false, ctx: 512, slotsTotal: 2 });
    r.transition('b', 'starting');
    expect('idle_since' in r.status('b')).toBe(false);
    r.bindEngine('b', {
      url: 'http://127.0.0.1:1',
      replica_id: 'r0',
      engine_version: 'v',
      slots_total: 2,
      ctx: 512,
      mode: 'managed',
    });
    now += 1000;
    r.transition('b', 'ready');
    expect(r.status('b').idle_since).toBe('2026-01-01T00:00:01.000Z');
    now += 1000;
    // idleness changes are told at once (pool-managerd heartbeats on them when it loads on request)
    const told: boolean[] = [];
    r.onIdleChange((id, idle) => told.push(idle));
    const l1 = r.lease('b');
    const l2 = r.lease('b');
    expect('idle_since' in r.status('b')).toBe(false);
    now += 1000;
    l1.release();
    expect('idle_since' in r.status('b')).toBe(false); // one slot still leased
    now += 1000;
    l2.release();
    expect(r.status('b').idle_since).toBe('2026-01-01T00:00:04.000Z');
    expect(told).toEqual([false, true]);
    // A restart does not make a used pool look fresh: it stays idle since its last release.
    r.transition('b', 'starting');
    now += 1000;
    r.transition('b', 'ready');
    expect(r.snapshots()[0]?.idle_since).toBe('2026-01-01T00:00:04.000Z');
  });

  it("origin: catalog for a pool loaded on request, absent for the node's own (payloads unchanged)", () => {
    const r = readyRegistry(1);
    r.register('c', { managed: true, origin: 'catalog', models: ['m'], deterministic: false, ctx: 1, slotsTotal: 1 });
    expect(r.status('c').origin).toBe('catalog');
    expect(r.snapshots().find((s) => s.pool_id === 'c')?.origin).toBe('catalog');
    expect('origin' in r.status('b')).toBe(false);
    expect(Object.keys(r.snapshots().find((s) => s.pool_id === 'b') ?? {})).not.toContain('origin');
  });

  it('memory_bytes: the projection before an engine; then the larger of RSS and projection; nothing when stopped or failed', () => {
    const rss = new Map<number, number>();
    const r = new PoolTable({ residentBytes: (pid) => rss.get(pid) });
    r.register('p', { managed: true, models: ['m'], deterministic: false, ctx: 512, slotsTotal: 1 });
    expect('memory_bytes' in r.status('p')).toBe(false); // nothing known yet
    r.setProjectedBytes('p', 1000);
    expect(r.status('p').memory_bytes).toBe(1000);
    r.transition('p', 'starting');
    const engine = {
      url: 'u',
      replica_id: 'r0',
      engine_version: 'v',
      slots_total: 1,
      ctx: 512,
      pid: 42,
      mode: 'managed' as const,
    };
    r.bindEngine('p', engine);
    rss.set(42, 600); // compute buffers not touched yet: the projection stands
    expect(r.status('p').memory_bytes).toBe(1000);
    rss.set(42, 1500); // more than projected: what it really takes
    expect(r.snapshots()[0]?.memory_bytes).toBe(1500);
    rss.delete(42); // gone between unbind and read: the projection again
    expect(r.status('p').memory_bytes).toBe(1000);
    r.unbindEngine('p');
    r.transition('p', 'failed', 'breaker open');
    expect('memory_bytes' in r.status('p')).toBe(false);
    r.transition('p', 'starting', 'half-open trial');
    expect(r.status('p').memory_bytes).toBe(1000);
  });

  it('remove forgets a pool and tells membership listeners; register tells them too', () => {
    const r = readyRegistry(1);
    const seen: string[] = [];
    r.onMembership((id, event) => seen.push(`${event} ${id}`));
    r.register('c', { managed: true, models: ['m'], deterministic: false, ctx: 1, slotsTotal: 1 });
    const l = r.lease('b');
    r.remove('b');
    r.remove('b');
    l.release(); // a lease of the forgotten pool is released harmlessly
    expect(seen).toEqual(['added c', 'removed b']);
    expect(r.ids()).toEqual(['c']);
    expect(() => r.status('b')).toThrow(PoolNotFoundError);
  });
});
