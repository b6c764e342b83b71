// Unloads and eviction of catalog copies (.specs/67-models-on-demand.md) against both cluster
// stores: a copy idle past its idle_ttl_s is unloaded (never below the pin, never a busy one), and
// a load no node has room for evicts the longest-idle copy of a model of no higher priority (never
// a busy or pinned one). The on-demand node is a real socket (testing/on-demand-node.ts); the test
// reports its pools through the node API, as pool-managerd does.
import type { NodeMemory, PoolSnapshot } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { onDemandNode, refusal, type OnDemandNode } from '../testing/on-demand-node.js';
import { STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import { makeApp as makeTestApp, snapshot, storeOf, taskBody, waitFor, type TestApp } from '../testing/test-helpers.js';

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
  ): Promise<{ app: TestApp; node: OnDemandNode; heartbeat: () => Promise<void> }> {
    const app = await makeTestApp({}, { idleUnloadSweepMs: 100 }, undefined, undefined, storeOf(kind, stores));
    t = app;
    const on = await onDemandNode();
    n = on;
    const reg = await app.app.inject({
      method: 'POST',
      url: '/v2/nodes/register',
      headers: app.auth,
      payload: {
        ...{ node_id: 'n1', machine_id: 'n1', address: on.url, pools: pools(), version: 'x', memory: MEMORY },
        capabilities: { gpus: [], cpu_cores: 1, ram_total_bytes: 1 },
      },
    });
    expect(reg.statusCode).toBe(200);
    for (const payload of entries) {
      const put = await app.app.inject({ method: 'POST', url: '/v2/catalog/models', headers: app.auth, payload });
      expect(put.statusCode, put.body).toBe(201);
    }
    const heartbeat = async (): Promise<void> => {
      await app.app.inject({
        method: 'POST',
        url: '/v2/nodes/n1/heartbeat',
        headers: app.auth,
        payload: { timestamp: new Date().toISOString(), pools: pools(), memory: MEMORY },
      });
    };
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

  it('nothing may be evicted (busy, pinned, higher priority): the load is refused 503 INSUFFICIENT_MEMORY and no copy is unloaded', async () => {
    const listed = [
      pool('working', 'working-model', { slots_free: 0 }),
      pool('pinned', 'pinned-model', { idle_since: ago(90_000) }),
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
    );
    on.answerLoad = () => refusal(503, 'INSUFFICIENT_MEMORY', 'projected 1 GiB, 0 free');
    const res = await app.app.inject({
      method: 'POST',
      url: '/v2/tasks',
      headers: app.auth,
      payload: taskBody({ model_ref: 'new' }),
    });
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toMatchObject({ code: 'INSUFFICIENT_MEMORY', retriable: true });
    expect(res.json().message).toContain('no idle copy of another model may be evicted');
    expect(on.unloads).toEqual([]);
  });
});
