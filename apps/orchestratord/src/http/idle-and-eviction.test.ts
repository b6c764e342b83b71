// Unloads and eviction of catalog copies (.specs/67-models-on-demand.md) against both cluster
// stores: a copy idle past its idle_ttl_s is unloaded (never below the pin, never a busy one), and
// a load no node has room for evicts the longest-idle copy of a model of no higher priority (never
// a busy or pinned one). The on-demand node is a real socket (testing/on-demand-node.ts); the test
// reports its pools through the node API, as pool-managerd does.
import type { NodeMemory, PoolSnapshot } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import type { AppTuning } from '../app.js';
import { onDemandNode, refusal, type OnDemandNode } from '../testing/on-demand-node.js';
import { STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import {
  heartbeatNode,
  makeApp as makeTestApp,
  registerNode,
  snapshot,
  storeOf,
  taskBody,
  waitFor,
  type TestApp,
} from '../testing/test-helpers.js';

const GiB = 1024 ** 3;
const MEMORY: NodeMemory = { budget_bytes: 2 * GiB, used_bytes: 2 * GiB };
const ago = (ms: number): string => new Date(Date.now() - ms).toISOString();

describe.each(STORE_KINDS)('idle unloads and eviction (%s store)', (kind) => {
  const stores = storeHarness(kind);
  let t: TestApp | undefined;
  let n: OnDemandNode | undefined;
  let beat: NodeJS.Timeout | undefined;
  afterEach(async () => {
    clearInterval(beat);
    await t?.close();
    t = undefined;
    await n?.close();
    n = undefined;
  });

  const pool = (poolId: string, ref: string, over: Partial<PoolSnapshot> = {}): PoolSnapshot =>
    snapshot({ pool_id: poolId, origin: 'catalog', models: [ref], state: 'ready', ready: true, ...over });

  /** An app, an on-demand node heartbeating `pools()` every 200 ms, and catalog entries. */
  async function setUp(
    pools: () => PoolSnapshot[],
    entries: object[],
    tuning: AppTuning = {},
    memory: () => NodeMemory = () => MEMORY,
  ): Promise<{ app: TestApp; node: OnDemandNode; heartbeat: () => Promise<void> }> {
    const app = await makeTestApp(
      {},
      { idleUnloadSweepMs: 100, ...tuning },
      undefined,
      undefined,
      storeOf(kind, stores),
    );
    t = app;
    const on = await onDemandNode();
    n = on;
    await registerNode(app, 'n1', pools(), on.url, memory());
    for (const payload of entries) {
      const put = await app.app.inject({ method: 'POST', url: '/v2/catalog/models', headers: app.auth, payload });
      expect(put.statusCode, put.body).toBe(201);
    }
    const heartbeat = (): Promise<void> => heartbeatNode(app, 'n1', pools(), memory());
    await heartbeat();
    beat = setInterval(() => void heartbeat(), 200);
    return { app, node: on, heartbeat };
  }

  it('a copy idle past its idle_ttl_s is unloaded; a pinned model keeps its copy, a busy copy and a model with no ttl stay', async () => {
    const idle = pool('old', 'ttl-model', { idle_since: ago(5000) });
    const pinned = pool('kept', 'pinned-model', { idle_since: ago(60_000) });
    const busy = pool('busy', 'busy-model', { slots_free: 0 });
    const forever = pool('forever', 'no-ttl-model', { idle_since: ago(60_000) });
    let listed = [idle, pinned, busy, forever];
    const { node: on } = await setUp(
      () => listed,
      [
        { ref: 'ttl-model', idle_ttl_s: 2 },
        { ref: 'pinned-model', idle_ttl_s: 1, pin: 1 },
        { ref: 'busy-model', idle_ttl_s: 1 },
        { ref: 'no-ttl-model', idle_ttl_s: 0 },
      ],
    );
    on.answerUnload = (poolId) => {
      listed = listed.filter((p) => p.pool_id !== poolId);
      return { status: 202, body: {} };
    };
    await waitFor(() => on.unloads.length > 0, 5000, 'the idle copy unloaded');
    // a few more sweeps: nothing else goes
    await new Promise((r) => setTimeout(r, 600));
    expect(on.unloads.map((u) => u.pool_id)).toEqual(['old']);
  });

  it('a load no node has room for evicts the longest-idle copy of a model of no higher priority, then loads; busy and pinned copies are never evicted', async () => {
    let listed = [
      pool('recent', 'recent-model', { idle_since: ago(1000) }),
      pool('oldest', 'oldest-model', { idle_since: ago(50_000) }),
      pool('important', 'important-model', { idle_since: ago(90_000) }),
      pool('pinned', 'pinned-model', { idle_since: ago(90_000) }),
      pool('working', 'working-model', { slots_free: 0 }),
    ];
    const { app, node: on } = await setUp(
      () => listed,
      [
        { ref: 'recent-model' },
        { ref: 'oldest-model' },
        { ref: 'important-model', priority: 10 },
        { ref: 'pinned-model', pin: 1 },
        { ref: 'working-model' },
        { ref: 'new-model', aliases: ['new'] },
      ],
    );
    let roomFor = 0;
    const accepted = on.answerLoad;
    on.answerLoad = (body) => {
      if (roomFor === 0) return refusal(503, 'INSUFFICIENT_MEMORY', 'projected 1 GiB, 0 free');
      roomFor -= 1;
      setTimeout(() => {
        listed = [...listed, pool(body.pool_id, body.model, { state: 'provisioning', ready: false })];
      }, 5);
      return accepted(body);
    };
    on.answerUnload = (poolId) => {
      listed = listed.filter((p) => p.pool_id !== poolId);
      roomFor += 1;
      return { status: 202, body: {} };
    };
    const res = await app.app.inject({
      method: 'POST',
      url: '/v2/tasks',
      headers: app.auth,
      payload: taskBody({ model_ref: 'new' }),
    });
    expect(res.statusCode, res.body).toBe(202);
    expect(on.unloads.map((u) => u.pool_id)).toEqual(['oldest']);
    // the node's figures showed no room: the eviction came first, then the one load
    expect(on.loads.map((l) => l.model)).toEqual(['new-model']);
  });

  it('nothing idle may go: the task waits; after the swap wait a busy copy of no higher priority drains (its work finishes), never a pinned or higher-priority one; then the model loads', async () => {
    let room = false;
    let listed = [
      pool('working', 'working-model', { slots_free: 0 }),
      pool('pinned', 'pinned-model', { slots_free: 0 }),
      pool('important', 'important-model', { idle_since: ago(90_000) }),
    ];
    const { app, node: on } = await setUp(
      () => listed,
      [
        { ref: 'working-model' },
        { ref: 'pinned-model', pin: 1 },
        { ref: 'important-model', priority: 10 },
        { ref: 'new-model', aliases: ['new'], priority: 5 },
      ],
      { swapWaitMs: 300, roomRetryMs: 50 },
      () => (room ? { ...MEMORY, used_bytes: GiB } : MEMORY),
    );
    const accepted = on.answerLoad;
    on.answerLoad = (body) => {
      if (!room) return refusal(503, 'INSUFFICIENT_MEMORY', 'projected 1 GiB, 0 free');
      setTimeout(() => {
        listed = [...listed, pool(body.pool_id, body.model, { state: 'provisioning', ready: false })];
      }, 5);
      return accepted(body);
    };
    on.answerUnload = (poolId) => {
      // the node drains it; its work in flight finishes, then it leaves and its memory is free
      setTimeout(() => {
        listed = listed.filter((p) => p.pool_id !== poolId);
        room = true;
      }, 100);
      return { status: 202, body: {} };
    };
    const admittedAt = Date.now();
    const res = await app.app.inject({
      method: 'POST',
      url: '/v2/tasks',
      headers: app.auth,
      payload: taskBody({ model_ref: 'new' }),
    });
    expect(res.statusCode, res.body).toBe(202);
    await waitFor(() => on.unloads.length > 0, 5000, 'a swap');
    expect(Date.now() - admittedAt, 'not before the swap wait').toBeGreaterThanOrEqual(300);
    expect(on.unloads).toEqual([{ pool_id: 'working', deadline_ms: 60_000 }]);
    await waitFor(() => listed.some((p) => p.models.includes('new-model')), 5000, 'the load after the swap');
    const loaded = listed.find((p) => p.models.includes('new-model'))!;
    listed = listed.map((p) => (p === loaded ? { ...p, state: 'ready', ready: true, slots_free: 1 } : p));
    await waitFor(
      () => app.logs.records().some((l) => l.msg === 'task placed' && l.task_id === res.json().task_id),
      5000,
      'the task placed on the swapped-in model',
    );
    expect(on.unloads.map((u) => u.pool_id)).toEqual(['working']);
  });
});
