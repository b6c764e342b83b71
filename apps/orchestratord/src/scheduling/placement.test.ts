import { describe, expect, it } from 'vitest';
import type { CandidateIndex, PoolCandidate } from '../registry/pool-view.js';
import { place, type PlacementRequest, type RoundRobinCursor } from './placement.js';

function pool(over: Partial<PoolCandidate> & { pool_id: string }): PoolCandidate {
  return {
    node_id: 'n1',
    node_state: 'online',
    state: 'ready',
    ready: true,
    draining: false,
    slots_total: 2,
    free: 2,
    leased: 0,
    models: ['m'],
    deterministic: false,
    ctx: 4096,
    ...over,
  };
}
const req = (over: Partial<PlacementRequest> = {}): PlacementRequest => ({ model_ref: 'm', ctx: 0, ...over });
const rr = (): RoundRobinCursor => ({ next: 0 });
const chosen = (d: ReturnType<typeof place>): string | undefined =>
  d.kind === 'assign' ? `${d.candidate.node_id}/${d.candidate.pool_id}` : undefined;

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
    expect(
      place(
        req(),
        pools.filter((p) => p.pool_id !== 'f'),
        'least-loaded',
        rr(),
      ).kind,
    ).toBe('wait');
  });

  it('least-loaded: most free slots, then lowest load ratio, then pool id, then node id', () => {
    expect(
      chosen(place(req(), [pool({ pool_id: 'a', free: 1 }), pool({ pool_id: 'b', free: 2 })], 'least-loaded', rr())),
    ).toBe('n1/b');
    expect(
      chosen(
        place(
          req(),
          [pool({ pool_id: 'a', free: 2, slots_total: 8 }), pool({ pool_id: 'b', free: 2, slots_total: 2 })],
          'least-loaded',
          rr(),
        ),
      ),
    ).toBe('n1/b');
    expect(chosen(place(req(), [pool({ pool_id: 'b' }), pool({ pool_id: 'a' })], 'least-loaded', rr()))).toBe('n1/a');
    expect(
      chosen(
        place(
          req(),
          [pool({ pool_id: 'a', node_id: 'n2' }), pool({ pool_id: 'a', node_id: 'n1' })],
          'least-loaded',
          rr(),
        ),
      ),
    ).toBe('n1/a');
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
    expect(chosen(place(pin('p'), [pool({ pool_id: 'p', free: 1 }), ...pools.slice(0, 1)], 'least-loaded', rr()))).toBe(
      'n1/p',
    );
    const unknown = place(pin('zz'), pools, 'least-loaded', rr());
    expect(unknown).toMatchObject({ kind: 'reject', code: 'POOL_UNAVAILABLE' });
    const failed = place(pin('p'), [pool({ pool_id: 'p', state: 'failed', ready: false })], 'least-loaded', rr());
    expect(failed).toMatchObject({ kind: 'reject', code: 'POOL_UNREADY' });
    const draining = place(pin('p'), [pool({ pool_id: 'p', draining: true })], 'least-loaded', rr());
    expect(draining).toMatchObject({ kind: 'reject', code: 'POOL_UNREADY' });
    const otherModel = place(
      pin('p'),
      [pool({ pool_id: 'p', models: ['x'] }), pool({ pool_id: 'a' })],
      'least-loaded',
      rr(),
    );
    expect(otherModel).toMatchObject({ kind: 'reject', code: 'POOL_UNAVAILABLE' });
    // Known but provisioning, or its node offline: the task waits (until its deadline).
    expect(
      place(pin('p'), [pool({ pool_id: 'p', state: 'provisioning', ready: false })], 'least-loaded', rr()).kind,
    ).toBe('wait');
    expect(place(pin('p'), [pool({ pool_id: 'p', node_state: 'offline' })], 'least-loaded', rr()).kind).toBe('wait');
  });

  it('prefer tries preferred pools in order, falls back unless allow_fallback is false', () => {
    const pools = [pool({ pool_id: 'a', free: 4 }), pool({ pool_id: 'b', free: 1 }), pool({ pool_id: 'c', free: 0 })];
    const prefer = (list: string[], allow = true) =>
      req({ placement: { mode: 'prefer', prefer_pools: list, allow_fallback: allow } });
    expect(place(prefer(['c', 'b']), pools, 'least-loaded', rr())).toMatchObject({
      kind: 'assign',
      reason: 'preferred',
      candidate: { pool_id: 'b' },
    });
    expect(place(prefer(['c']), pools, 'least-loaded', rr())).toMatchObject({
      kind: 'assign',
      reason: 'fallback',
      candidate: { pool_id: 'a' },
    });
    expect(place(prefer(['c'], false), pools, 'least-loaded', rr()).kind).toBe('wait');
    expect(place(prefer(['zz'], false), pools, 'least-loaded', rr())).toMatchObject({
      kind: 'reject',
      code: 'POOL_UNAVAILABLE',
    });
  });

  it('never uses avoided pools', () => {
    const pools = [pool({ pool_id: 'a', free: 4 }), pool({ pool_id: 'b', free: 1 })];
    const avoid = req({ placement: { mode: 'auto', avoid_pools: ['a'], allow_fallback: true } });
    expect(chosen(place(avoid, pools, 'least-loaded', rr()))).toBe('n1/b');
    const avoidAll = req({ placement: { mode: 'auto', avoid_pools: ['a', 'b'], allow_fallback: true } });
    expect(place(avoidAll, pools, 'least-loaded', rr())).toMatchObject({ kind: 'reject', code: 'POOL_UNAVAILABLE' });
  });

  it('strict determinism only places on deterministic pools', () => {
    const pools = [
      pool({ pool_id: 'a', free: 4 }),
      pool({ pool_id: 'd', deterministic: true, slots_total: 1, free: 1 }),
    ];
    expect(chosen(place(req({ determinism: 'strict' }), pools, 'least-loaded', rr()))).toBe('n1/d');
    expect(chosen(place(req({ determinism: 'best_effort' }), pools, 'least-loaded', rr()))).toBe('n1/a');
    expect(place(req({ determinism: 'strict' }), pools.slice(0, 1), 'least-loaded', rr())).toMatchObject({
      kind: 'reject',
      code: 'POOL_UNAVAILABLE',
    });
  });

  it('skips pools whose ctx is too small and reports an unserved model', () => {
    const pools = [pool({ pool_id: 'small', ctx: 1024, free: 4 }), pool({ pool_id: 'big', ctx: 8192, free: 1 })];
    expect(chosen(place(req({ ctx: 4096 }), pools, 'least-loaded', rr()))).toBe('n1/big');
    expect(place(req({ model_ref: 'nope' }), pools, 'least-loaded', rr())).toMatchObject({
      kind: 'reject',
      code: 'MODEL_NOT_AVAILABLE',
    });
  });

  it('places a task only on pools that serve its kind; a pool that reports no capabilities serves chat and completion', () => {
    const pools = [
      pool({ pool_id: 'a', free: 4, capabilities: ['embeddings'] }),
      pool({ pool_id: 'b', free: 1, capabilities: ['chat', 'completion', 'infill'] }),
      pool({ pool_id: 'c', free: 2 }),
    ];
    expect(chosen(place(req({ kind: 'embeddings' }), pools, 'least-loaded', rr()))).toBe('n1/a');
    expect(chosen(place(req({ kind: 'infill' }), pools, 'least-loaded', rr()))).toBe('n1/b');
    expect(chosen(place(req({ kind: 'chat' }), pools, 'least-loaded', rr()))).toBe('n1/c');
    expect(place(req({ kind: 'rerank' }), pools, 'least-loaded', rr())).toMatchObject({
      kind: 'reject',
      code: 'POOL_UNAVAILABLE',
      message: expect.stringContaining('rerank'),
    });
  });

  it('infill waits for a generation pool whose engine has not said yet; once it is ready without infill, the task is rejected', () => {
    const starting = [pool({ pool_id: 'g', state: 'starting', ready: false, free: 0 })];
    expect(place(req({ kind: 'infill' }), starting, 'least-loaded', rr())).toMatchObject({ kind: 'wait' });
    expect(place(req({ kind: 'embeddings' }), starting, 'least-loaded', rr())).toMatchObject({ kind: 'reject' });
    expect(place(req({ kind: 'infill' }), [pool({ pool_id: 'g' })], 'least-loaded', rr())).toMatchObject({
      kind: 'reject',
      code: 'POOL_UNAVAILABLE',
    });
    expect(
      chosen(
        place(
          req({ kind: 'infill' }),
          [pool({ pool_id: 'g', capabilities: ['chat', 'completion', 'infill'] })],
          'least-loaded',
          rr(),
        ),
      ),
    ).toBe('n1/g');
  });

  it('exclusions are soft: a failed pool is avoided while another exists, reused when it is the only one', () => {
    const pools = [pool({ pool_id: 'a', free: 4 }), pool({ pool_id: 'b', free: 1 })];
    expect(chosen(place(req({ exclude: new Set(['n1/a']) }), pools, 'least-loaded', rr()))).toBe('n1/b');
    expect(chosen(place(req({ exclude: new Set(['n1/a']) }), pools.slice(0, 1), 'least-loaded', rr()))).toBe('n1/a');
  });
});

/**
 * The rules written the slow, obvious way (filter everything, sort, take the first): place() must
 * decide exactly like this, over a plain array and over a per-model index alike.
 */
function reference(
  r: PlacementRequest,
  cands: readonly PoolCandidate[],
  strategy: 'least-loaded' | 'round-robin',
  cursor: RoundRobinCursor,
): ReturnType<typeof place> {
  const p = r.placement;
  const serves = (c: PoolCandidate) => c.models.includes(r.model_ref);
  if (p?.mode === 'pin') {
    const pinned = cands.filter((c) => c.pool_id === p.pin_pool_id);
    if (pinned.length === 0)
      return {
        kind: 'reject',
        code: 'POOL_UNAVAILABLE',
        message: `pinned pool '${p.pin_pool_id}' is not known to the cluster`,
      };
    const usable = pinned.filter(serves);
    if (usable.length === 0)
      return {
        kind: 'reject',
        code: 'POOL_UNAVAILABLE',
        message: `pinned pool '${p.pin_pool_id}' does not serve model '${r.model_ref}'`,
      };
    if (usable.every((c) => ['failed', 'stopped', 'draining'].includes(c.state) || c.draining)) {
      const c = usable[0] as PoolCandidate;
      return {
        kind: 'reject',
        code: 'POOL_UNREADY',
        message: `pinned pool '${c.pool_id}' is ${c.draining ? 'draining' : c.state}`,
      };
    }
  }
  const ok = (c: PoolCandidate, excl: boolean): boolean =>
    serves(c) &&
    !(r.ctx > 0 && c.ctx > 0 && c.ctx < r.ctx) &&
    !(r.determinism === 'strict' && !c.deterministic) &&
    !(p?.avoid_pools ?? []).includes(c.pool_id) &&
    !(p?.mode === 'pin' && c.pool_id !== p.pin_pool_id) &&
    !(p?.mode === 'prefer' && !p.allow_fallback && !(p.prefer_pools ?? []).includes(c.pool_id)) &&
    !(excl && (r.exclude?.has(`${c.node_id}/${c.pool_id}`) ?? false));
  let eligible = cands.filter((c) => ok(c, true));
  if (eligible.length === 0 && (r.exclude?.size ?? 0) > 0) eligible = cands.filter((c) => ok(c, false));
  if (eligible.length === 0) {
    return cands.some(serves)
      ? {
          kind: 'reject',
          code: 'POOL_UNAVAILABLE',
          message: `no pool serving '${r.model_ref}' satisfies the task's constraints (ctx, determinism, placement)`,
        }
      : { kind: 'reject', code: 'MODEL_NOT_AVAILABLE', message: `no pool serves model '${r.model_ref}'` };
  }
  const placeable = eligible.filter(
    (c) => c.node_state === 'online' && c.state === 'ready' && c.ready && !c.draining && c.free > 0,
  );
  if (placeable.length === 0)
    return { kind: 'wait', reason: `no free slot on the ${eligible.length} eligible pool(s)` };
  const byId = (a: PoolCandidate, b: PoolCandidate) =>
    a.pool_id < b.pool_id ? -1 : a.pool_id > b.pool_id ? 1 : a.node_id < b.node_id ? -1 : a.node_id > b.node_id ? 1 : 0;
  const ratio = (c: PoolCandidate) => (c.slots_total === 0 ? 1 : (c.slots_total - c.free) / c.slots_total);
  const pick = (list: PoolCandidate[]): PoolCandidate => {
    if (strategy === 'round-robin') {
      const c = [...list].sort(byId)[cursor.next % list.length] as PoolCandidate;
      cursor.next += 1;
      return c;
    }
    return [...list].sort((a, b) => b.free - a.free || ratio(a) - ratio(b) || byId(a, b))[0] as PoolCandidate;
  };
  if (p?.mode === 'pin') return { kind: 'assign', candidate: pick(placeable), reason: 'pinned' };
  if (p?.mode === 'prefer' && p.prefer_pools !== undefined) {
    for (const id of p.prefer_pools) {
      const preferred = placeable.filter((c) => c.pool_id === id);
      if (preferred.length > 0) return { kind: 'assign', candidate: pick(preferred), reason: 'preferred' };
    }
    return { kind: 'assign', candidate: pick(placeable), reason: 'fallback' };
  }
  return { kind: 'assign', candidate: pick(placeable), reason: 'strategy' };
}

/** mulberry32, so a failure names a reproducible seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function indexOf(cands: readonly PoolCandidate[]): CandidateIndex {
  const sorted = [...cands].sort((a, b) =>
    a.pool_id < b.pool_id ? -1 : a.pool_id > b.pool_id ? 1 : a.node_id < b.node_id ? -1 : a.node_id > b.node_id ? 1 : 0,
  );
  return {
    poolsForModel: (m) => sorted.filter((c) => c.models.includes(m)),
    poolsWithId: (id) => sorted.filter((c) => c.pool_id === id),
  };
}

describe('place over an index and over a plain array', () => {
  it('decides exactly as the filter-and-sort reference in random clusters, for both strategies', () => {
    for (let seed = 1; seed <= 1000; seed += 1) {
      const rand = rng(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
      const ids = ['a', 'b', 'c', 'd', 'e'];
      const seen = new Set<string>();
      const cands: PoolCandidate[] = [];
      for (let i = 0; i < 2 + Math.floor(rand() * 14); i += 1) {
        const c = pool({
          pool_id: pick(ids),
          node_id: pick(['n1', 'n2', 'n3']),
          node_state: rand() < 0.85 ? 'online' : pick(['offline', 'registering'] as const),
          state: rand() < 0.8 ? 'ready' : pick(['starting', 'draining', 'failed', 'stopped', 'provisioning'] as const),
          ready: rand() < 0.85,
          draining: rand() < 0.1,
          slots_total: pick([0, 1, 2, 4]),
          free: pick([0, 0, 1, 2, 3]),
          models: rand() < 0.1 ? ['m', 'x'] : [pick(['m', 'm', 'x'])],
          deterministic: rand() < 0.4,
          ctx: pick([0, 2048, 8192]),
        });
        if (seen.has(`${c.node_id}/${c.pool_id}`)) continue;
        seen.add(`${c.node_id}/${c.pool_id}`);
        cands.push(c);
      }
      const mode = pick(['auto', 'auto', 'pin', 'prefer'] as const);
      const r = req({
        model_ref: rand() < 0.9 ? 'm' : 'y',
        ctx: pick([0, 4096]),
        determinism: rand() < 0.2 ? 'strict' : undefined,
        placement:
          rand() < 0.3
            ? undefined
            : {
                mode,
                allow_fallback: rand() < 0.6,
                ...(mode === 'pin' ? { pin_pool_id: pick([...ids, 'zz']) } : {}),
                ...(mode === 'prefer' && rand() < 0.9 ? { prefer_pools: [pick(ids), pick(ids), pick(ids)] } : {}),
                ...(rand() < 0.3 ? { avoid_pools: [pick(ids)] } : {}),
              },
        exclude:
          rand() < 0.3 ? new Set(cands.filter(() => rand() < 0.4).map((c) => `${c.node_id}/${c.pool_id}`)) : new Set(),
      });
      for (const strategy of ['least-loaded', 'round-robin'] as const) {
        const start = Math.floor(rand() * 10);
        const want = reference(r, cands, strategy, { next: start });
        const overArray = { next: start };
        const overIndex = { next: start };
        expect(place(r, cands, strategy, overArray), `seed ${seed} ${strategy} array`).toEqual(want);
        expect(place(r, indexOf(cands), strategy, overIndex), `seed ${seed} ${strategy} index`).toEqual(want);
        expect(overIndex.next).toBe(overArray.next);
        expect(overArray.next).toBe(start + (want.kind === 'assign' && strategy === 'round-robin' ? 1 : 0));
      }
    }
  });

  it("only asks the index for the model's pools, or the pinned id's, and returns its own objects", () => {
    const pools = [
      pool({ pool_id: 'a', free: 1 }),
      pool({ pool_id: 'b', free: 3 }),
      pool({ pool_id: 'c', models: ['x'], free: 9 }),
    ];
    const asked: string[] = [];
    const index: CandidateIndex = {
      poolsForModel: (m) => {
        asked.push(`model:${m}`);
        return pools.filter((c) => c.models.includes(m));
      },
      poolsWithId: (id) => {
        asked.push(`id:${id}`);
        return pools.filter((c) => c.pool_id === id);
      },
    };
    const d = place(req(), index, 'least-loaded', rr());
    expect(d.kind === 'assign' && d.candidate).toBe(pools[1]);
    expect(
      place(req({ placement: { mode: 'pin', pin_pool_id: 'a', allow_fallback: true } }), index, 'least-loaded', rr()),
    ).toMatchObject({
      kind: 'assign',
      reason: 'pinned',
      candidate: { pool_id: 'a' },
    });
    expect(
      place(req({ placement: { mode: 'pin', pin_pool_id: 'c', allow_fallback: true } }), index, 'least-loaded', rr()),
    ).toMatchObject({
      kind: 'reject',
      code: 'POOL_UNAVAILABLE',
      message: "pinned pool 'c' does not serve model 'm'",
    });
    expect(asked).toEqual(['model:m', 'id:a', 'id:c']);
  });
});
