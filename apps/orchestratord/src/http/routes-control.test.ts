import { CapabilitiesSchema, ClusterPoolListSchema, NodeListSchema, PoolHealthSchema } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import {
  makeApp as makeAppWith,
  registerNode,
  snapshot,
  storeOf,
  TOKEN,
  type TestApp,
} from '../testing/test-helpers.js';

// Against both cluster stores: with Redis the node routes write through the store (.specs/65-cluster-store.md).
describe.each(STORE_KINDS)('node, control and metrics routes (%s store)', (kind) => {
  const stores = storeHarness(kind);
  const makeApp = (over: Parameters<typeof makeAppWith>[0] = {}): Promise<TestApp> =>
    makeAppWith(over, {}, undefined, undefined, storeOf(kind, stores));
  let t: TestApp;
  const fixtures: FixturePoolManager[] = [];
  afterEach(async () => {
    await t?.close();
    await Promise.all(fixtures.splice(0).map((f) => f.close()));
  });

  it('node API: register 200, heartbeat 200 / 404 unknown, list, delete 204 / 404, invalid body 400', async () => {
    t = await makeApp({ heartbeat_interval_ms: 2500 });
    const reg = {
      node_id: 'gpu-1',
      machine_id: 'host-1',
      address: 'http://10.0.0.5:9200',
      pools: [snapshot({ pool_id: 'p' })],
      capabilities: {
        gpus: [{ device_id: 0, name: 'H100', vram_total_bytes: 80e9, compute_capability: '9.0' }],
        cpu_cores: 16,
        ram_total_bytes: 1e11,
      },
      version: '0.1.0',
    };
    const r = await t.app.inject({ method: 'POST', url: '/v2/nodes/register', headers: t.auth, payload: reg });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ next_heartbeat_ms: 2500 });
    let list = NodeListSchema.parse((await t.app.inject({ method: 'GET', url: '/v2/nodes', headers: t.auth })).json());
    expect(list.nodes[0]).toMatchObject({
      node_id: 'gpu-1',
      state: 'registering',
      address: 'http://10.0.0.5:9200',
      version: '0.1.0',
    });
    const hb = await t.app.inject({
      method: 'POST',
      url: '/v2/nodes/gpu-1/heartbeat',
      headers: t.auth,
      payload: { timestamp: new Date().toISOString(), pools: [snapshot({ pool_id: 'p', slots_free: 0 })] },
    });
    expect(hb.statusCode).toBe(200);
    expect(hb.json()).toEqual({ next_heartbeat_ms: 2500 });
    list = NodeListSchema.parse((await t.app.inject({ method: 'GET', url: '/v2/nodes', headers: t.auth })).json());
    expect(list.nodes[0]).toMatchObject({ state: 'online', pools: [{ pool_id: 'p', slots_free: 0 }] });
    const unknown = await t.app.inject({
      method: 'POST',
      url: '/v2/nodes/ghost/heartbeat',
      headers: t.auth,
      payload: { timestamp: new Date().toISOString(), pools: [] },
    });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ code: 'NOT_FOUND', message: expect.stringMatching(/register again/) });
    const bad = await t.app.inject({
      method: 'POST',
      url: '/v2/nodes/register',
      headers: t.auth,
      payload: { ...reg, address: 'not a url' },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'INVALID_PARAMS', message: expect.stringMatching(/address/) });
    expect((await t.app.inject({ method: 'DELETE', url: '/v2/nodes/gpu-1', headers: t.auth })).statusCode).toBe(204);
    expect((await t.app.inject({ method: 'DELETE', url: '/v2/nodes/gpu-1', headers: t.auth })).statusCode).toBe(404);
    expect(
      (
        await t.app.inject({
          method: 'POST',
          url: '/v2/nodes/gpu-1/heartbeat',
          headers: t.auth,
          payload: { timestamp: new Date().toISOString(), pools: [] },
        })
      ).statusCode,
    ).toBe(404);
  });

  it('capabilities, pools and pool health come from the registry', async () => {
    t = await makeApp({ ctx_max: 1000, admission_capacity: 7 });
    let caps = CapabilitiesSchema.parse(
      (await t.app.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: t.auth })).json(),
    );
    expect(caps).toMatchObject({
      ctx_max: 1000,
      models: [],
      engines: [{ engine: 'llamacpp', versions: [] }],
      workloads: ['completion'],
      admission: { capacity: 7, policy: 'reject' },
    });
    await registerNode(t, 'n1', [
      snapshot({
        pool_id: 'a',
        ctx: 8192,
        engine_version: 'b1-abc',
        models: ['m1', 'm2'],
        slots_total: 2,
        slots_free: 2,
        vram_free_bytes: 42 * 1024 ** 3,
      }),
      snapshot({ pool_id: 'z', state: 'failed', ready: false, last_error: 'engine crashed 5 times', models: ['m3'] }),
    ]);
    caps = CapabilitiesSchema.parse(
      (await t.app.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: t.auth })).json(),
    );
    expect(caps).toMatchObject({
      ctx_max: 8192,
      models: ['m1', 'm2'],
      engines: [{ engine: 'llamacpp', versions: ['b1-abc'] }],
    });
    const pools = ClusterPoolListSchema.parse(
      (await t.app.inject({ method: 'GET', url: '/v2/pools', headers: t.auth })).json(),
    );
    expect(pools.pools.map((p) => [p.pool_id, p.node_id, p.state, p.slots_free, p.leased, p.vram_free_bytes])).toEqual([
      ['a', 'n1', 'ready', 2, 0, 42 * 1024 ** 3],
      ['z', 'n1', 'failed', 1, 0, undefined],
    ]);
    const health = PoolHealthSchema.parse(
      (await t.app.inject({ method: 'GET', url: '/v2/pools/a/health', headers: t.auth })).json(),
    );
    expect(health).toEqual({ pool_id: 'a', live: true, ready: true, draining: false, state: 'ready' });
    const failed = PoolHealthSchema.parse(
      (await t.app.inject({ method: 'GET', url: '/v2/pools/z/health', headers: t.auth })).json(),
    );
    expect(failed).toEqual({
      pool_id: 'z',
      live: false,
      ready: false,
      draining: false,
      state: 'failed',
      last_error: 'engine crashed 5 times',
    });
    const missing = await t.app.inject({ method: 'GET', url: '/v2/pools/nope/health', headers: t.auth });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('drain and reload are forwarded to the owning node with the Bearer token; its reply is relayed', async () => {
    t = await makeApp();
    const node = await FixturePoolManager.start({
      nodeId: 'n1',
      pools: [{ pool_id: 'p', models: ['m'], slots: 1 }],
      token: TOKEN,
    });
    fixtures.push(node);
    await registerNode(t, 'n1', node.snapshots(), node.url);
    const drain = await t.app.inject({
      method: 'POST',
      url: '/v2/pools/p/drain',
      headers: t.auth,
      payload: { deadline_ms: 1000 },
    });
    expect(drain.statusCode).toBe(202);
    expect(drain.json()).toEqual({ pool_id: 'p', operation: 'drain', state: 'draining' });
    expect(node.operations).toEqual([{ pool_id: 'p', op: 'drain', body: { deadline_ms: 1000 } }]);
    // The pool is unplaceable right away, before the node's next heartbeat says so.
    expect(t.app.services.registry.pools()[0]?.draining).toBe(true);
    const reload = await t.app.inject({
      method: 'POST',
      url: '/v2/pools/p/reload',
      headers: t.auth,
      payload: { new_model_ref: 'synthetic:llama' },
    });
    expect(reload.statusCode).toBe(202);
    expect(node.operations[1]).toEqual({
      pool_id: 'p',
      op: 'reload',
      body: { new_model_ref: 'synthetic:llama', deadline_ms: 30000 },
    });
    const badBody = await t.app.inject({ method: 'POST', url: '/v2/pools/p/drain', headers: t.auth, payload: {} });
    expect(badBody.statusCode).toBe(400);
    expect(badBody.json()).toMatchObject({ code: 'INVALID_PARAMS', message: expect.stringMatching(/deadline_ms/) });
    expect(
      (
        await t.app.inject({
          method: 'POST',
          url: '/v2/pools/nope/drain',
          headers: t.auth,
          payload: { deadline_ms: 1 },
        })
      ).statusCode,
    ).toBe(404);
    expect(
      (
        await t.app.inject({
          method: 'POST',
          url: '/v2/pools/nope/reload',
          headers: t.auth,
          payload: { new_model_ref: 'x' },
        })
      ).statusCode,
    ).toBe(404);
  });

  it('drain to an unreachable node answers 503 POOL_UNAVAILABLE with back-off headers', async () => {
    t = await makeApp();
    const node = await FixturePoolManager.start({ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1 }] });
    const address = node.url;
    await node.close();
    await registerNode(t, 'n1', [snapshot({ pool_id: 'p' })], address);
    const res = await t.app.inject({
      method: 'POST',
      url: '/v2/pools/p/drain',
      headers: t.auth,
      payload: { deadline_ms: 1000 },
    });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ code: 'POOL_UNAVAILABLE', retriable: true });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(res.headers['x-backoff-ms']).toBeDefined();
  });

  it('/metrics: Prometheus text without auth, the contract series, and scraping changes nothing', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [snapshot({ pool_id: 'p', slots_free: 0 })]);
    const a = await t.app.inject({ method: 'GET', url: '/metrics' });
    expect(a.statusCode).toBe(200);
    expect(a.headers['content-type']).toMatch(/text\/plain/);
    for (const name of [
      'llorch_tasks_enqueued_total',
      'llorch_tasks_started_total',
      'llorch_tasks_canceled_total',
      'llorch_tasks_rejected_total',
      'llorch_tokens_out_total',
      'llorch_admission_backpressure_events_total',
      'llorch_placement_decisions_total',
      'llorch_queue_depth',
      'llorch_task_first_token_seconds',
      'llorch_task_decode_seconds',
      'llorch_node_registrations_total',
      'llorch_node_heartbeats_total',
      'llorch_nodes_online',
      'llorch_active_leases',
    ]) {
      expect(a.body, name).toContain(`# TYPE ${name} `);
    }
    expect(a.body).toContain('llorch_nodes_online 1');
    const b = await t.app.inject({ method: 'GET', url: '/metrics' });
    // Ours only: the process and runtime series (CPU, heap, event loop) move by themselves.
    const ours = (text: string): string[] => text.split('\n').filter((l) => l.includes('llorch_'));
    expect(ours(b.body)).toEqual(ours(a.body));
  });
});
