import { describe, expect, it } from 'vitest';
import { place, type PlacementRequest, type PoolCandidate, type RoundRobinCursor } from './placement.js';

function pool(over: Partial<PoolCandidate> & { pool_id: string }): PoolCandidate {
  return {
    node_id: 'n1', node_state: 'online', state: 'ready', ready: true, draining: false,
    slots_total: 2, free: 2, leased: 0, models: ['m'], deterministic: false, ctx: 4096, ...over,
  };
}
const req = (over: Partial<PlacementRequest> = {}): PlacementRequest => ({ model_ref: 'm', ctx: 0, ...over });
const rr = (): RoundRobinCursor => ({ next: 0 });
const chosen = (d: ReturnType<typeof place>): string | undefined => (d.kind === 'assign' ? `${d.candidate.node_id}/${d.candidate.pool_id}` : undefined);

describe('place', () => {
  it('only places on ready, not draining, online pools with a free slot that serve the model', () => {
    const pools = [
      pool({ pool_id: 'a', node_state: 'offline', free: 5 }),
      pool({ pool_id: 'b', draining: true, free: 5 }),
      pool({ pool_id: 'c', state: 'starting', ready: false, free: 5 }),
      pool({ pool_id: 'd', free: 0 }),
      pool({ pool_id: 'e', models: ['other'], free: 5 }),
      pool({ pool_id: 'f', free: 1 }),
      pool({ pool_id: 'g', node_state: 'registering', free: 5 }),
    ];
    expect(chosen(place(req(), pools, 'least-loaded', rr()))).toBe('n1/f');
    expect(place(req(), pools.filter((p) => p.pool_id !== 'f'), 'least-loaded', rr()).kind).toBe('wait');
  });

  it('least-loaded: most free slots, then lowest load ratio, then pool id, then node id', () => {
    expect(chosen(place(req(), [pool({ pool_id: 'a', free: 1 }), pool({ pool_id: 'b', free: 2 })], 'least-loaded', rr()))).toBe('n1/b');
    expect(chosen(place(req(), [pool({ pool_id: 'a', free: 2, slots_total: 8 }), pool({ pool_id: 'b', free: 2, slots_total: 2 })], 'least-loaded', rr()))).toBe('n1/b');
    expect(chosen(place(req(), [pool({ pool_id: 'b' }), pool({ pool_id: 'a' })], 'least-loaded', rr()))).toBe('n1/a');
    expect(chosen(place(req(), [pool({ pool_id: 'a', node_id: 'n2' }), pool({ pool_id: 'a', node_id: 'n1' })], 'least-loaded', rr()))).toBe('n1/a');
  });

  it('round-robin cycles through placeable pools in pool/node order, deterministically', () => {
    const pools = [pool({ pool_id: 'c' }), pool({ pool_id: 'a' }), pool({ pool_id: 'b' })];
    const cursor = rr();
    const picks = Array.from({ length: 4 }, () => chosen(place(req(), pools, 'round-robin', cursor)));
    expect(picks).toEqual(['n1/a', 'n1/b', 'n1/c', 'n1/a']);
  });

  it('pin routes only to the pinned pool, waits while it is busy, and fails typed otherwise', () => {
    const pools = [pool({ pool_id: 'a', free: 2 }), pool({ pool_id: 'p', free: 0 })];
    const pin = (id: string) => req({ placement: { mode: 'pin', pin_pool_id: id, allow_fallback: true } });
    expect(place(pin('p'), pools, 'least-loaded', rr()).kind).toBe('wait');
    expect(chosen(place(pin('p'), [pool({ pool_id: 'p', free: 1 }), ...pools.slice(0, 1)], 'least-loaded', rr()))).toBe('n1/p');
    const unknown = place(pin('zz'), pools, 'least-loaded', rr());
    expect(unknown).toMatchObject({ kind: 'reject', code: 'POOL_UNAVAILABLE' });
    const failed = place(pin('p'), [pool({ pool_id: 'p', state: 'failed', ready: false })], 'least-loaded', rr());
    expect(failed).toMatchObject({ kind: 'reject', code: 'POOL_UNREADY' });
    const draining = place(pin('p'), [pool({ pool_id: 'p', draining: true })], 'least-loaded', rr());
    expect(draining).toMatchObject({ kind: 'reject', code: 'POOL_UNREADY' });
    const otherModel = place(pin('p'), [pool({ pool_id: 'p', models: ['x'] }), pool({ pool_id: 'a' })], 'least-loaded', rr());
    expect(otherModel).toMatchObject({ kind: 'reject', code: 'POOL_UNAVAILABLE' });
    // Known but provisioning, or its node offline: the task waits (until its deadline).
    expect(place(pin('p'), [pool({ pool_id: 'p', state: 'provisioning', ready: false })], 'least-loaded', rr()).kind).toBe('wait');
    expect(place(pin('p'), [pool({ pool_id: 'p', node_state: 'offline' })], 'least-loaded', rr()).kind).toBe('wait');
  });

  it('prefer tries preferred pools in order, falls back unless allow_fallback is false', () => {
    const pools = [pool({ pool_id: 'a', free: 4 }), pool({ pool_id: 'b', free: 1 }), pool({ pool_id: 'c', free: 0 })];
    const prefer = (list: string[], allow = true) => req({ placement: { mode: 'prefer', prefer_pools: list, allow_fallback: allow } });
    expect(place(prefer(['c', 'b']), pools, 'least-loaded', rr())).toMatchObject({ kind: 'assign', reason: 'preferred', candidate: { pool_id: 'b' } });
    expect(place(prefer(['c']), pools, 'least-loaded', rr())).toMatchObject({ kind: 'assign', reason: 'fallback', candidate: { pool_id: 'a' } });
    expect(place(prefer(['c'], false), pools, 'least-loaded', rr()).kind).toBe('wait');
    expect(place(prefer(['zz'], false), pools, 'least-loaded', rr())).toMatchObject({ kind: 'reject', code: 'POOL_UNAVAILABLE' });
  });

  it('never uses avoided pools', () => {
    const pools = [pool({ pool_id: 'a', free: 4 }), pool({ pool_id: 'b', free: 1 })];
    const avoid = req({ placement: { mode: 'auto', avoid_pools: ['a'], allow_fallback: true } });
    expect(chosen(place(avoid, pools, 'least-loaded', rr()))).toBe('n1/b');
    const avoidAll = req({ placement: { mode: 'auto', avoid_pools: ['a', 'b'], allow_fallback: true } });
    expect(place(avoidAll, pools, 'least-loaded', rr())).toMatchObject({ kind: 'reject', code: 'POOL_UNAVAILABLE' });
  });

  it('strict determinism only places on deterministic pools', () => {
    const pools = [pool({ pool_id: 'a', free: 4 }), pool({ pool_id: 'd', deterministic: true, slots_total: 1, free: 1 })];
    expect(chosen(place(req({ determinism: 'strict' }), pools, 'least-loaded', rr()))).toBe('n1/d');
    expect(chosen(place(req({ determinism: 'best_effort' }), pools, 'least-loaded', rr()))).toBe('n1/a');
    expect(place(req({ determinism: 'strict' }), pools.slice(0, 1), 'least-loaded', rr())).toMatchObject({ kind: 'reject', code: 'POOL_UNAVAILABLE' });
  });

  it('skips pools whose ctx is too small and reports an unserved model', () => {
    const pools = [pool({ pool_id: 'small', ctx: 1024, free: 4 }), pool({ pool_id: 'big', ctx: 8192, free: 1 })];
    expect(chosen(place(req({ ctx: 4096 }), pools, 'least-loaded', rr()))).toBe('n1/big');
    expect(place(req({ model_ref: 'nope' }), pools, 'least-loaded', rr())).toMatchObject({ kind: 'reject', code: 'MODEL_NOT_AVAILABLE' });
  });

  it('exclusions are soft: a failed pool is avoided while another exists, reused when it is the only one', () => {
    const pools = [pool({ pool_id: 'a', free: 4 }), pool({ pool_id: 'b', free: 1 })];
    expect(chosen(place(req({ exclude: new Set(['n1/a']) }), pools, 'least-loaded', rr()))).toBe('n1/b');
    expect(chosen(place(req({ exclude: new Set(['n1/a']) }), pools.slice(0, 1), 'least-loaded', rr()))).toBe('n1/a');
  });
});
