// The dashboard's view of models on demand (issue 40) through the real app, with both cluster
// stores: each node's on-demand memory and each pool's origin, memory and idle time in
// `GET /v2/dashboard`, and the live feed (`model_events`) — a load started, ready and failed, and
// unloads asked by an operator, by the idle sweep and by eviction — pushed on the event stream.
// The on-demand node is a real socket (testing/on-demand-node.ts); the test reports its pools
// through the node API, as pool-managerd does.
import {
  DashboardSnapshotSchema,
  type DashboardSnapshot,
  type NodeMemory,
  type PoolSnapshot,
} from '@llama-orch/contracts';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import type { AppTuning } from '../app.js';
import { onDemandNode, refusal, type OnDemandNode } from '../testing/on-demand-node.js';
import { STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import {
  heartbeatNode,
  makeApp,
  registerNode,
  snapshot,
  storeOf,
  waitFor,
  type TestApp,
} from '../testing/test-helpers.js';

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;
const ago = (ms: number): string => new Date(Date.now() - ms).toISOString();

/** `GET /v2/dashboard/events` over a real socket: every `snapshot` event, checked against the contract. */
async function openEvents(url: string, headers: Record<string, string>) {
  const controller = new AbortController();
  const res = await request(`${url}/v2/dashboard/events`, { headers, signal: controller.signal });
  const snapshots: DashboardSnapshot[] = [];
  const state = { ended: false };
  let buffered = '';
  const done = (async () => {
    try {
      for await (const chunk of res.body) {
        buffered += (chunk as Buffer).toString('utf8');
        for (let i = buffered.indexOf('\n\n'); i >= 0; i = buffered.indexOf('\n\n')) {
          const block = buffered.slice(0, i);
          buffered = buffered.slice(i + 2);
          if (!block.startsWith('event: snapshot\n')) continue;
          snapshots.push(DashboardSnapshotSchema.parse(JSON.parse(block.slice('event: snapshot\ndata: '.length))));
        }
      }
    } catch {
      // aborted by the test
    } finally {
      state.ended = true;
    }
  })();
  return {
    status: res.statusCode,
    close: async () => {
      controller.abort();
      await done;
    },
    next: async (pred: (s: DashboardSnapshot) => boolean, what: string, timeoutMs = 5000) => {
      await waitFor(() => snapshots.some(pred) || state.ended, timeoutMs, what);
      const found = snapshots.find(pred);
      if (found === undefined) throw new Error(`stream ended without ${what}`);
      return found;
    },
  };
}

/** `GET /v2/dashboard` until `pred` holds (every 50 ms, at most 5 s). */
async function dashboardUntil(
  dashboard: () => Promise<DashboardSnapshot>,
  pred: (s: DashboardSnapshot) => boolean,
  what: string,
): Promise<DashboardSnapshot> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const s = await dashboard();
    if (pred(s)) return s;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(s.model_events)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.each(STORE_KINDS)('dashboard: models on demand (%s store)', (kind) => {
  const stores = storeHarness(kind);
  const cleanups: Array<() => Promise<unknown>> = [];
  let beat: NodeJS.Timeout | undefined;
  afterEach(async () => {
    clearInterval(beat);
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  /** An app on loopback, an on-demand node heartbeating `pools()` and `memory()` every 100 ms, and catalog entries. */
  async function setUp(
    pools: () => PoolSnapshot[],
    memory: () => NodeMemory,
    entries: object[],
    tuning: AppTuning = {},
  ): Promise<{ t: TestApp; url: string; node: OnDemandNode; dashboard: () => Promise<DashboardSnapshot> }> {
    const t = await makeApp({}, tuning, undefined, undefined, storeOf(kind, stores));
    cleanups.push(() => t.close());
    const url = await t.app.listen({ port: 0, host: '127.0.0.1' });
    const node = await onDemandNode();
    cleanups.push(() => node.close());
    await registerNode(t, 'n1', pools(), node.url, memory());
    for (const payload of entries) {
      const put = await t.app.inject({ method: 'POST', url: '/v2/catalog/models', headers: t.auth, payload });
      expect(put.statusCode, put.body).toBe(201);
    }
    await heartbeatNode(t, 'n1', pools(), memory());
    beat = setInterval(() => void heartbeatNode(t, 'n1', pools(), memory()).catch(() => undefined), 100);
    const dashboard = async (): Promise<DashboardSnapshot> => {
      const res = await t.app.inject({ method: 'GET', url: '/v2/dashboard', headers: t.auth });
      expect(res.statusCode, res.body).toBe(200);
      return DashboardSnapshotSchema.parse(res.json());
    };
    return { t, url, node, dashboard };
  }

  it("shows the node's on-demand memory and each pool's origin, memory and idle time; a node without on-demand memory shows none", async () => {
    const memory: NodeMemory = { budget_bytes: 2 * GiB, used_bytes: 768 * MiB };
    const idleSince = ago(30_000);
    const pools = [
      snapshot({ pool_id: 'chat', models: ['chat-model'], memory_bytes: 512 * MiB, idle_since: idleSince }),
      snapshot({
        pool_id: 'coder-a1b2c3',
        models: ['coder-model'],
        origin: 'catalog',
        memory_bytes: 256 * MiB,
        slots_free: 0,
      }),
    ];
    const { t, dashboard } = await setUp(
      () => pools,
      () => memory,
      [{ ref: 'coder-model' }],
    );
    await registerNode(t, 'n2', [snapshot({ pool_id: 'static' })]);

    const snap = await dashboard();
    const n1 = snap.nodes.find((n) => n.node_id === 'n1');
    expect(n1?.memory).toEqual({ budget_bytes: 2 * GiB, used_bytes: 768 * MiB });
    expect(snap.nodes.find((n) => n.node_id === 'n2')?.memory).toBeUndefined();
    const chat = snap.pools.find((p) => p.pool_id === 'chat');
    expect(chat).toMatchObject({
      node_id: 'n1',
      models: ['chat-model'],
      memory_bytes: 512 * MiB,
      idle_since: idleSince,
    });
    expect(chat?.origin).toBeUndefined(); // static: the node's config
    const coder = snap.pools.find((p) => p.pool_id === 'coder-a1b2c3');
    expect(coder).toMatchObject({ models: ['coder-model'], origin: 'catalog', memory_bytes: 256 * MiB });
    expect(coder?.idle_since).toBeUndefined(); // a slot is leased
    expect(snap.model_events).toEqual([]);
  });

  it('a load (started, then ready) and an operator unload appear in the live feed, pushed on the event stream, newest first', async () => {
    let listed: PoolSnapshot[] = [];
    let memory: NodeMemory = { budget_bytes: 2 * GiB, used_bytes: 0 };
    const { t, url, node, dashboard } = await setUp(
      () => listed,
      () => memory,
      [{ ref: 'coder-model', aliases: ['coder'] }],
    );
    const events = await openEvents(url, t.auth);
    cleanups.push(() => events.close());
    expect(events.status).toBe(200);
    await events.next(() => true, 'the first snapshot');

    const load = await t.app.inject({ method: 'POST', url: '/v2/catalog/models/coder/load', headers: t.auth });
    expect(load.statusCode, load.body).toBe(202);
    const poolId = node.loads[0]?.pool_id ?? '';
    const started = await events.next((s) => s.model_events.length > 0, 'a snapshot with the load started');
    expect(started.model_events).toEqual([
      { at_ms: expect.any(Number), kind: 'load_started', model: 'coder-model', node_id: 'n1', pool_id: poolId },
    ]);

    // the node reports the pool preparing, then ready with its memory
    listed = [
      snapshot({ pool_id: poolId, models: ['coder-model'], origin: 'catalog', state: 'provisioning', ready: false }),
    ];
    await new Promise((r) => setTimeout(r, 300));
    listed = [
      snapshot({
        pool_id: poolId,
        models: ['coder-model'],
        origin: 'catalog',
        memory_bytes: 300 * MiB,
        idle_since: ago(0),
      }),
    ];
    memory = { budget_bytes: 2 * GiB, used_bytes: 300 * MiB };
    const ready = await events.next((s) => s.model_events[0]?.kind === 'load_ready', 'a snapshot with the load ready');
    expect(ready.model_events.map((e) => [e.kind, e.model, e.node_id, e.pool_id])).toEqual([
      ['load_ready', 'coder-model', 'n1', poolId],
      ['load_started', 'coder-model', 'n1', poolId],
    ]);
    await events.next(
      (s) => s.nodes[0]?.memory?.used_bytes === 300 * MiB && s.pools[0]?.memory_bytes === 300 * MiB,
      "a snapshot with the loaded copy's memory",
    );

    const unload = await t.app.inject({
      method: 'POST',
      url: '/v2/catalog/models/coder/unload',
      headers: t.auth,
      payload: { deadline_ms: 1500 },
    });
    expect(unload.statusCode, unload.body).toBe(202);
    const unloading = await events.next((s) => s.model_events[0]?.kind === 'unloading', 'a snapshot with the unload');
    expect(unloading.model_events[0]).toEqual({
      at_ms: expect.any(Number),
      kind: 'unloading',
      model: 'coder-model',
      node_id: 'n1',
      pool_id: poolId,
      cause: 'operator',
      detail: 'asked by an operator (deadline 1500 ms)',
    });
    expect(unloading.model_events).toHaveLength(3);
    // GET /v2/dashboard lists the same feed
    expect((await dashboard()).model_events).toEqual(unloading.model_events);
  });

  it("a failed load shows the node's reason; the idle sweep's and an eviction's unloads say why", async () => {
    const GIB_FULL: NodeMemory = { budget_bytes: 2 * GiB, used_bytes: 2 * GiB };
    let listed: PoolSnapshot[] = [
      snapshot({ pool_id: 'stale', models: ['stale-model'], origin: 'catalog', idle_since: ago(60_000) }),
      snapshot({ pool_id: 'old', models: ['old-model'], origin: 'catalog', idle_since: ago(50_000) }),
    ];
    let roomFor = 0;
    const { t, node, dashboard } = await setUp(
      () => listed,
      () => GIB_FULL,
      [
        { ref: 'stale-model', idle_ttl_s: 5 },
        { ref: 'old-model', idle_ttl_s: 0 },
        { ref: 'broken-model' },
        { ref: 'new-model' },
      ],
      { idleUnloadSweepMs: 100 },
    );
    const accepted = node.answerLoad;
    node.answerLoad = (body) => {
      if (body.model === 'new-model' && roomFor === 0)
        return refusal(503, 'INSUFFICIENT_MEMORY', 'projected 1 GiB, 0 free');
      roomFor = Math.max(0, roomFor - 1);
      return accepted(body);
    };
    node.answerUnload = (poolId) => {
      listed = listed.filter((p) => p.pool_id !== poolId);
      roomFor += 1;
      return { status: 202, body: {} };
    };

    // the idle sweep unloads the copy idle past its ttl
    await waitFor(() => node.unloads.some((u) => u.pool_id === 'stale'), 5000, 'the idle unload');
    // the node reports a load failing
    const broken = await t.app.inject({
      method: 'POST',
      url: '/v2/catalog/models/broken-model/load',
      headers: t.auth,
      payload: { node: 'n1' },
    });
    expect(broken.statusCode, broken.body).toBe(202);
    const brokenPool = node.loads.find((l) => l.model === 'broken-model')?.pool_id ?? '';
    listed = [
      ...listed,
      snapshot({
        pool_id: brokenPool,
        models: ['broken-model'],
        origin: 'catalog',
        state: 'failed',
        ready: false,
        last_error: 'engine exited with code 1 before it was ready',
      }),
    ];
    await dashboardUntil(
      dashboard,
      (s) => s.model_events.some((e) => e.kind === 'load_failed'),
      'the failed load in the feed',
    );
    // no node has room for new-model: the longest-idle copy of another model is evicted
    const evicting = await t.app.inject({ method: 'POST', url: '/v2/catalog/models/new-model/load', headers: t.auth });
    expect(evicting.statusCode, evicting.body).toBe(202);

    const snap = await dashboard();
    const feed = snap.model_events.map((e) => ({
      kind: e.kind,
      model: e.model,
      pool: e.pool_id,
      cause: e.cause,
      detail: e.detail,
    }));
    expect(feed).toEqual([
      {
        kind: 'load_started',
        model: 'new-model',
        pool: node.loads.at(-1)?.pool_id,
        cause: undefined,
        detail: undefined,
      },
      {
        kind: 'unloading',
        model: 'old-model',
        pool: 'old',
        cause: 'eviction',
        detail: "evicted to make room for 'new-model'",
      },
      {
        kind: 'load_failed',
        model: 'broken-model',
        pool: brokenPool,
        cause: undefined,
        detail: 'engine exited with code 1 before it was ready',
      },
      { kind: 'load_started', model: 'broken-model', pool: brokenPool, cause: undefined, detail: undefined },
      {
        kind: 'unloading',
        model: 'stale-model',
        pool: 'stale',
        cause: 'idle',
        detail: expect.stringMatching(/^idle \d+ s \(idle_ttl_s 5\)$/),
      },
    ]);
  });
});
