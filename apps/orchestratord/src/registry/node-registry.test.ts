import type { NodeRegisterRequest } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import type { StoredNode } from '../store/node-liveness-store.js';
import { NodeRegistry, type RegistryEvent } from './node-registry.js';
import { isPlaceable } from './pool-view.js';
import { captureLogger, ManualClock, snapshot } from '../testing/test-helpers.js';

const reg = (nodeId: string, pools = [snapshot({ pool_id: 'p' })]): NodeRegisterRequest => ({
  node_id: nodeId,
  machine_id: nodeId,
  address: `http://${nodeId}.invalid:9200`,
  pools,
  capabilities: { gpus: [], cpu_cores: 2, ram_total_bytes: 1024 },
  version: 't',
});
const hb = (pools = [snapshot({ pool_id: 'p' })]) => ({ timestamp: new Date().toISOString(), pools });

/** Still online `ms` after now, offline 1 ms later (as the sweep sees it). */
function expectOfflineAfter(r: NodeRegistry, clock: ManualClock, nodeId: string, ms: number): void {
  clock.advance(ms);
  r.sweep();
  expect(r.nodeState(nodeId)).toBe('online');
  clock.advance(1);
  r.sweep();
  expect(r.nodeState(nodeId)).toBe('offline');
}

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
    expectOfflineAfter(r, clock, 'n1', 3000);
    expect(r.pools()).toHaveLength(1);
    expect(r.pools().some(isPlaceable)).toBe(false);
    r.heartbeat('n1', hb());
    expect(r.nodeState('n1')).toBe('online');
    expect(events).toEqual(['registered', 'online', 'heartbeat', 'offline', 'online', 'heartbeat']);
  });

  it('counts the 3 intervals from when a heartbeat was sent, unless its timestamp is implausible', () => {
    const clock = new ManualClock();
    const r = make(clock); // interval 1000: timestamps up to 250 ms old on arrival are trusted
    const sentAgo = (ms: number) => ({
      timestamp: new Date(clock.now() - ms).toISOString(),
      pools: [snapshot({ pool_id: 'p' })],
    });
    r.register(reg('n1'));
    r.heartbeat('n1', sentAgo(200)); // 200 ms in flight: the node can only have failed after sending it
    expect(r.list()[0]).toMatchObject({
      state: 'online',
      last_seen: new Date(clock.now() - 200).toISOString(),
      state_since: new Date(clock.now()).toISOString(),
    });
    expectOfflineAfter(r, clock, 'n1', 2800);
    expect(r.list()[0]?.state_since).toBe(new Date(clock.now()).toISOString());
    for (const skewed of [sentAgo(300), sentAgo(-50)]) {
      // too old, or from the future: the arrival counts
      r.heartbeat('n1', skewed);
      expect(r.list()[0]?.last_seen).toBe(new Date(clock.now()).toISOString());
      expectOfflineAfter(r, clock, 'n1', 3000);
    }
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
    const r = new NodeRegistry({
      heartbeatIntervalMs: 50,
      clock: { now: () => Date.now() },
      logger: captureLogger().logger,
    });
    registries.push(r);
    r.register(reg('n1'));
    r.heartbeat('n1', hb());
    const started = Date.now();
    while (r.nodeState('n1') === 'online' && Date.now() - started < 5000)
      await new Promise((res) => setTimeout(res, 10));
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
    const clock = new ManualClock();
    const r = make(clock);
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
    // Slots busy for reasons other than our leases stay unavailable (a heartbeat sent well after
    // the release: one sent within RELEASE_LAG_MS of it may still show the released slot busy).
    clock.advance(1000);
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', slots_total: 4, slots_free: 1 })]));
    expect(r.pools()[0]?.free).toBe(1);
  });

  it('a heartbeat sent while a lease still ran, arriving after its release, does not keep the freed slot busy', () => {
    const clock = new ManualClock();
    const r = make(clock);
    r.register(reg('n1'));
    const at = (ms: number) => ({
      timestamp: new Date(ms).toISOString(),
      pools: [snapshot({ pool_id: 'p', slots_total: 1, slots_free: 0 })],
    });
    r.heartbeat('n1', { ...at(clock.now()), pools: [snapshot({ pool_id: 'p', slots_total: 1, slots_free: 1 })] });
    const lease = r.lease('n1', 'p');
    clock.advance(500);
    const sent = clock.now(); // the node reports the slot busy (our task runs) …
    clock.advance(20);
    lease.release(); // … the task ends while the heartbeat is in flight …
    clock.advance(30);
    r.heartbeat('n1', at(sent)); // … and arrives: the busy slot was ours.
    expect(r.pools()[0]?.free).toBe(1);
    // A later heartbeat that still reports it busy: someone else's now.
    clock.advance(1000);
    r.heartbeat('n1', at(clock.now() - 5));
    expect(r.pools()[0]?.free).toBe(0);
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
    r.register(
      reg('n1', [snapshot({ pool_id: 'p', state: 'provisioning', ready: false, progress: { engine: 0.2, model: 0 } })]),
    );
    expect(r.pools()[0]?.provisioningEtaMs).toBeUndefined();
    clock.advance(1000);
    r.heartbeat(
      'n1',
      hb([snapshot({ pool_id: 'p', state: 'provisioning', ready: false, progress: { engine: 0.4, model: 0.2 } })]),
    );
    // progress 0.1 → 0.3 in 1 s: 0.7 left at 0.2/s = 3.5 s.
    expect(r.pools()[0]?.provisioningEtaMs).toBe(3500);
  });

  it('lists nodes with their state and pools; close() is idempotent', async () => {
    const r = make(new ManualClock());
    r.register(reg('n2'));
    r.register(reg('n1'));
    expect(r.list().map((n) => [n.node_id, n.state])).toEqual([
      ['n1', 'registering'],
      ['n2', 'registering'],
    ]);
    await r.close();
    await r.close();
    expect(r.state).toBe('closed');
  });

  it('keeps per-model and per-id lists in step with every change; lists already read do not change', () => {
    const clock = new ManualClock();
    const r = make(clock, 1000);
    const keys = (views: readonly { node_id: string; pool_id: string }[]) =>
      views.map((v) => `${v.node_id}/${v.pool_id}`);
    r.register(reg('n2', [snapshot({ pool_id: 'p', slots_total: 2, slots_free: 2 })]));
    r.register(
      reg('n1', [
        snapshot({ pool_id: 'p', slots_total: 2, slots_free: 2 }),
        snapshot({ pool_id: 'q', models: ['x', 'm'] }),
      ]),
    );
    r.heartbeat(
      'n1',
      hb([snapshot({ pool_id: 'p', slots_total: 2, slots_free: 2 }), snapshot({ pool_id: 'q', models: ['x', 'm'] })]),
    );
    r.heartbeat('n2', hb([snapshot({ pool_id: 'p', slots_total: 2, slots_free: 2 })]));
    expect(keys(r.poolsForModel('m'))).toEqual(['n1/p', 'n2/p', 'n1/q']);
    expect(keys(r.poolsForModel('x'))).toEqual(['n1/q']);
    expect(keys(r.poolsWithId('p'))).toEqual(['n1/p', 'n2/p']);
    expect(r.poolsForModel('nope')).toEqual([]);

    const before = r.poolsForModel('m');
    const lease = r.lease('n1', 'p');
    expect(r.poolsForModel('m')[0]).toMatchObject({ free: 1, leased: 1 });
    expect(r.poolsWithId('p')[0]).toMatchObject({ free: 1, leased: 1 });
    expect(before[0]).toMatchObject({ free: 2, leased: 0 });
    lease.release();
    expect(r.poolsForModel('m')[0]).toMatchObject({ free: 2, leased: 0 });

    // A heartbeat that changes a pool's models moves it between lists.
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', models: ['x'] }), snapshot({ pool_id: 'q', models: ['x', 'm'] })]));
    expect(keys(r.poolsForModel('m'))).toEqual(['n2/p', 'n1/q']);
    expect(keys(r.poolsForModel('x'))).toEqual(['n1/p', 'n1/q']);

    // Saturation runs out with time alone: no event, the next read shows the slots again.
    r.markSaturated('n2', 'p');
    expect(r.poolsForModel('m')[0]?.free).toBe(0);
    clock.advance(501);
    expect(r.poolsForModel('m')[0]?.free).toBe(2);
    r.markDraining('n2', 'p');
    expect(r.poolsWithId('p')[1]?.draining).toBe(true);

    clock.advance(3000);
    r.heartbeat('n1', hb([snapshot({ pool_id: 'p', models: ['x'] }), snapshot({ pool_id: 'q', models: ['x', 'm'] })]));
    r.sweep();
    expect(r.poolsWithId('p').map((v) => v.node_state)).toEqual(['online', 'offline']);

    // Re-registering with fewer pools drops the others; deregistering drops them all.
    r.register(reg('n1', [snapshot({ pool_id: 'q', models: ['m'] })]));
    expect(keys(r.poolsWithId('p'))).toEqual(['n2/p']);
    expect(keys(r.poolsForModel('x'))).toEqual([]);
    expect(r.poolsForModel('m').map((v) => [v.node_id, v.pool_id, v.node_state])).toEqual([
      ['n2', 'p', 'offline'],
      ['n1', 'q', 'registering'],
    ]);
    r.deregister('n2');
    expect(keys(r.poolsForModel('m'))).toEqual(['n1/q']);
    expect(r.poolsWithId('p')).toEqual([]);
    // pools() is the caller's copy.
    r.pools().pop();
    expect(r.pools()).toHaveLength(1);
  });

  it('the lists always agree with pools() through random registrations, heartbeats, leases and marks', () => {
    let seed = 7;
    const rand = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
    const clock = new ManualClock();
    const r = make(clock, 1000);
    const nodes = ['n1', 'n2', 'n3', 'n4'];
    const models = ['m', 'x', 'y'];
    const randomPools = () =>
      ['a', 'b', 'c']
        .filter(() => rand() < 0.7)
        .map((id) =>
          snapshot({
            pool_id: id,
            slots_total: 4,
            slots_free: Math.floor(rand() * 5),
            models: models.filter(() => rand() < 0.5),
          }),
        );
    const leases: { nodeId: string; poolId: string; release(): void }[] = [];
    const held = new Map<string, number>();
    const view = (n: string, id: string) => r.pools().find((v) => v.node_id === n && v.pool_id === id);
    for (let step = 0; step < 600; step += 1) {
      const n = pick(nodes);
      const op = pick([
        'register',
        'heartbeat',
        'heartbeat',
        'deregister',
        'lease',
        'lease',
        'release',
        'saturate',
        'suspect',
        'drain',
        'time',
      ] as const);
      if (op === 'register') r.register(reg(n, randomPools()));
      else if (op === 'heartbeat') r.heartbeat(n, hb(randomPools()));
      else if (op === 'deregister') r.deregister(n);
      else if (op === 'lease') {
        const l = r.lease(n, pick(['a', 'b', 'c']));
        leases.push(l);
        held.set(`${l.nodeId}/${l.poolId}`, (held.get(`${l.nodeId}/${l.poolId}`) ?? 0) + 1);
      } else if (op === 'release') {
        const l = leases.splice(Math.floor(rand() * leases.length), 1)[0];
        if (l !== undefined) held.set(`${l.nodeId}/${l.poolId}`, (held.get(`${l.nodeId}/${l.poolId}`) ?? 0) - 1);
        l?.release();
      } else if (op === 'saturate' || op === 'suspect') {
        const id = pick(['a', 'b', 'c']);
        if (op === 'saturate') r.markSaturated(n, id);
        else r.markSuspect(n, id);
        expect(view(n, id)?.free ?? 0, `step ${step}`).toBe(0);
      } else if (op === 'drain') {
        const id = pick(['a', 'b', 'c']);
        r.markDraining(n, id);
        expect(view(n, id)?.draining ?? true, `step ${step}`).toBe(true);
      } else {
        clock.advance(Math.floor(rand() * 1500));
        r.sweep();
      }
      const all = r.pools();
      const listed = r
        .list()
        .flatMap((node) => node.pools.map((p) => `${node.node_id}/${p.pool_id}`))
        .sort();
      expect(all.map((v) => `${v.node_id}/${v.pool_id}`).sort(), `step ${step}`).toEqual(listed);
      for (const m of models)
        expect(r.poolsForModel(m), `step ${step} model ${m}`).toEqual(all.filter((v) => v.models.includes(m)));
      for (const id of ['a', 'b', 'c'])
        expect(r.poolsWithId(id), `step ${step} pool ${id}`).toEqual(all.filter((v) => v.pool_id === id));
      for (const v of all) {
        expect(v.node_state, `step ${step}`).toBe(r.nodeState(v.node_id));
        expect(v.leased, `step ${step}`).toBe(held.get(`${v.node_id}/${v.pool_id}`) ?? 0);
        expect(v.snapshot, `step ${step}`).toBe(
          r
            .list()
            .find((node) => node.node_id === v.node_id)
            ?.pools.find((p) => p.pool_id === v.pool_id),
        );
        expect(v.free).toBeGreaterThanOrEqual(0);
        expect(v.free).toBeLessThanOrEqual(v.slots_total);
      }
    }
  });
});

// With a shared store the registry is a cache of the store's records (registry/cluster-node-sync.ts).
describe('NodeRegistry fed from the cluster store (applyStored)', () => {
  const stored = (
    req: NodeRegisterRequest,
    state: StoredNode['state'],
    stateSince: number,
    lastSeen: number,
    pools = req.pools,
  ): StoredNode => ({
    request: req,
    state,
    stateSince,
    lastSeen,
    pools,
  });

  it('takes registrations, heartbeats and offline as the store decided them; older records change nothing', async () => {
    const clock = new ManualClock();
    const logs = captureLogger();
    const r = new NodeRegistry({ heartbeatIntervalMs: 1000, clock, logger: logs.logger, livenessFromStore: true });
    const events: string[] = [];
    r.subscribe((e: RegistryEvent) => events.push(e.type));
    const t = clock.now();
    const req = reg('n1');
    r.applyStored(stored(req, 'registering', t, t), false);
    expect(r.nodeState('n1')).toBe('registering');
    r.applyStored(stored(req, 'online', t + 10, t + 10, [snapshot({ pool_id: 'p', slots_free: 0 })]), false);
    expect(r.nodeState('n1')).toBe('online');
    expect(r.pools()[0]?.free).toBe(0);
    // a list read before that heartbeat: ignored
    r.applyStored(stored(req, 'registering', t, t), false);
    expect(r.nodeState('n1')).toBe('online');
    // a later heartbeat: online since the first one (the store keeps state_since while the state holds)
    r.applyStored(stored(req, 'online', t + 10, t + 1000), false);
    expect(r.pools()[0]?.free).toBe(1);
    // no timer of its own: silent for 10 intervals, still online until the store says offline
    clock.advance(10_000);
    r.sweep();
    expect(r.nodeState('n1')).toBe('online');
    r.applyStored(stored(req, 'offline', t + 4100, t + 1000), true);
    expect(r.nodeState('n1')).toBe('offline');
    expect(r.pools()[0]?.node_state).toBe('offline');
    // the online record from before the offline (a stale read) does not bring it back; a new heartbeat does
    r.applyStored(stored(req, 'online', t + 10, t + 1000), false);
    expect(r.nodeState('n1')).toBe('offline');
    r.applyStored(stored(req, 'online', t + 9000, t + 9000), false);
    expect(r.nodeState('n1')).toBe('online');
    // re-registered at another replica (new address) and heard again before this one refreshed
    const moved = { ...req, address: 'http://n1-moved.invalid:9200' };
    r.applyStored(stored(moved, 'online', t + 9500, t + 9600), false);
    expect(r.pools()[0]?.address).toBe('http://n1-moved.invalid:9200');
    expect(events).toEqual([
      'registered',
      'online',
      'heartbeat',
      'heartbeat',
      'offline',
      'online',
      'heartbeat',
      'registered',
      'online',
      'heartbeat',
    ]);
    // only the replica the store handed the offline to warns
    expect(
      logs
        .records()
        .filter((l) => l.msg === 'node offline')
        .map((l) => l.level),
    ).toEqual([40]);
    expect(r.deregister('n1', false)).toBe(true);
    expect(r.pools()).toEqual([]);
    await r.close();
  });
});
