// The fleet catalog's routes (.specs/67-models-on-demand.md) against both cluster stores, with
// on-demand nodes on real sockets (testing/on-demand-node.ts) whose pools and memory the test
// reports through the node API, as pool-managerd would.
import {
  AvailabilitySchema,
  ClusterModelListSchema,
  ClusterModelSchema,
  NodeListSchema,
  type ClusterModel,
  type NodeMemory,
  type PoolSnapshot,
} from '@llama-orch/contracts';
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OrchestratorConfigSchema } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { buildApp, type OrchdApp } from '../app.js';
import { createUpstreamDispatchers } from '../upstream/dispatchers.js';
import { loadCredentials } from './credentials.js';
import { onDemandNode, refusal, type OnDemandNode } from '../testing/on-demand-node.js';
import { STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import {
  captureLogger,
  heartbeatNode,
  makeApp as makeTestApp,
  registerNode,
  snapshot,
  storeOf,
  TOKEN,
  waitFor,
  type TestApp,
} from '../testing/test-helpers.js';

const GiB = 1024 ** 3;
const REF = 'hf:org/repo/qwen-7b.Q4_K_M.gguf';
const catalogPool = (over: Partial<PoolSnapshot> & { pool_id: string }): PoolSnapshot =>
  snapshot({ origin: 'catalog', models: [REF], aliases: ['qwen'], ...over });

/** A node that loads models on request (with `memory`) or not (without), registered and online. */
const registerOnDemand = (
  t: TestApp,
  nodeId: string,
  address: string,
  memory: NodeMemory | undefined,
  pools: PoolSnapshot[] = [],
): Promise<void> => registerNode(t, nodeId, pools, address, memory);

describe.each(STORE_KINDS)('fleet catalog routes (%s store)', (kind) => {
  const stores = storeHarness(kind);
  let t: TestApp | undefined;
  const nodes: OnDemandNode[] = [];
  afterEach(async () => {
    await t?.close();
    t = undefined;
    await Promise.all(nodes.splice(0).map((n) => n.close()));
  });
  const makeApp = async (): Promise<TestApp> => {
    t = await makeTestApp({}, {}, undefined, undefined, storeOf(kind, stores));
    return t;
  };
  const node = async (): Promise<OnDemandNode> => {
    const n = await onDemandNode();
    nodes.push(n);
    return n;
  };
  const call = (app: TestApp, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
    app.app.inject({ method, url, headers: app.auth, ...(payload !== undefined ? { payload } : {}) });
  const model = async (app: TestApp, name: string): Promise<ClusterModel> => {
    const res = await call(app, 'GET', `/v2/catalog/models/${encodeURIComponent(name)}`);
    expect(res.statusCode, res.body).toBe(200);
    return ClusterModelSchema.parse(res.json());
  };

  it('register 201, update 200, names unique (409 CONFLICT), each model listed once with merged aliases, read and delete by alias', async () => {
    const app = await makeApp();
    await registerNode(app, 'n1', [
      snapshot({ pool_id: 'static', models: ['hf:org/repo/llama.gguf', 'llama-catalog-id'], aliases: ['llama'] }),
      snapshot({ pool_id: 'static2', models: ['llama-catalog-id'], state: 'provisioning', ready: false }),
    ]);
    const created = await call(app, 'POST', '/v2/catalog/models', {
      ref: REF,
      aliases: ['qwen', 'q7'],
      pin: 0,
      max_loaded: 2,
    });
    expect(created.statusCode).toBe(201);
    expect(ClusterModelSchema.parse(created.json())).toEqual({
      id: REF,
      ref: REF,
      status: 'registered',
      pools: [],
      aliases: ['q7', 'qwen'],
      registered: true,
      pinned: false,
      policy: {
        ctx: 2048,
        slots: 1,
        gpu: 'off',
        serve: 'generate',
        pin: 0,
        max_loaded: 2,
        idle_ttl_s: 900,
        priority: 0,
      },
    });
    const updated = await call(app, 'POST', '/v2/catalog/models', {
      ref: REF,
      aliases: ['qwen'],
      pin: 1,
      sha256: 'b'.repeat(64),
    });
    expect(updated.statusCode).toBe(200);
    expect(updated.json()).toMatchObject({
      aliases: ['qwen'],
      pinned: true,
      sha256: 'b'.repeat(64),
      policy: { pin: 1 },
    });
    // another entry's alias, a static pool's alias or model as another model's name: 409, nothing written
    for (const body of [
      { ref: 'hf:org/repo/other.gguf', aliases: ['qwen'] },
      { ref: 'hf:org/repo/other.gguf', aliases: ['llama'] },
      { ref: 'llama' },
      { ref: 'hf:org/repo/other.gguf', aliases: ['llama-catalog-id'] },
    ]) {
      const res = await call(app, 'POST', '/v2/catalog/models', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(409);
      expect(res.json()).toMatchObject({ code: 'CONFLICT', retriable: false });
    }
    // the static model itself may be registered (its policy then applies to loads of it)
    expect(
      (await call(app, 'POST', '/v2/catalog/models', { ref: 'hf:org/repo/llama.gguf', aliases: ['llama'] })).statusCode,
    ).toBe(201);
    const list = ClusterModelListSchema.parse((await call(app, 'GET', '/v2/catalog/models')).json());
    expect(list.models.map((m) => [m.id, m.status, m.pools, m.aliases, m.registered, m.pinned])).toEqual([
      ['hf:org/repo/llama.gguf', 'ready', ['n1/static', 'n1/static2'], ['llama'], true, true],
      [REF, 'registered', [], ['qwen'], true, true],
    ]);
    expect((await model(app, 'qwen')).id).toBe(REF);
    expect((await model(app, 'llama-catalog-id')).id).toBe('hf:org/repo/llama.gguf');
    const avail = AvailabilitySchema.parse((await call(app, 'GET', '/v2/catalog/availability')).json());
    expect(avail.models).toEqual([
      { model: 'hf:org/repo/llama.gguf', ready_pools: ['static'], provisioning_pools: ['static2'] },
      { model: REF, ready_pools: [], provisioning_pools: [] },
    ]);
    const unknown = await call(app, 'GET', '/v2/catalog/models/nope');
    expect([unknown.statusCode, unknown.json().code]).toEqual([404, 'MODEL_NOT_FOUND']);
    expect((await call(app, 'DELETE', '/v2/catalog/models/qwen')).statusCode).toBe(204);
    expect((await call(app, 'DELETE', `/v2/catalog/models/${encodeURIComponent(REF)}`)).json()).toMatchObject({
      code: 'MODEL_NOT_FOUND',
    });
    expect((await call(app, 'DELETE', '/v2/catalog/models/hf%3Aorg%2Frepo%2Fllama.gguf')).statusCode).toBe(204);
    // only a static pool serves it now: not a catalog entry
    expect((await call(app, 'DELETE', '/v2/catalog/models/llama')).json()).toMatchObject({ code: 'NOT_FOUND' });
    expect((await call(app, 'POST', '/v2/catalog/models', { ref: '' })).statusCode).toBe(400);
  });

  it('status from the pools: loading, ready (idle since the latest idle copy), unloading, failed with why; pinned by pin or a static pool', async () => {
    const app = await makeApp();
    await call(app, 'POST', '/v2/catalog/models', { ref: REF, aliases: ['qwen'], max_loaded: 3 });
    await registerOnDemand(app, 'n1', 'http://127.0.0.1:9', { budget_bytes: 16 * GiB, used_bytes: 0 });
    const status = async () => (await model(app, 'qwen')).status;
    await heartbeatNode(app, 'n1', [catalogPool({ pool_id: 'a', state: 'provisioning', ready: false })]);
    expect(await status()).toBe('loading');
    await heartbeatNode(app, 'n1', [
      catalogPool({ pool_id: 'a', idle_since: '2026-01-01T00:00:05.000Z' }),
      catalogPool({ pool_id: 'b', idle_since: '2026-01-01T00:00:09.000Z' }),
    ]);
    expect(await model(app, 'qwen')).toMatchObject({
      status: 'ready',
      pools: ['n1/a', 'n1/b'],
      idle_since: '2026-01-01T00:00:09.000Z',
      pinned: false,
    });
    // one copy busy: not idle
    await heartbeatNode(app, 'n1', [
      catalogPool({ pool_id: 'a', idle_since: '2026-01-01T00:00:05.000Z' }),
      catalogPool({ pool_id: 'b' }),
    ]);
    expect((await model(app, 'qwen')).idle_since).toBeUndefined();
    await heartbeatNode(app, 'n1', [catalogPool({ pool_id: 'a', state: 'draining', ready: false, draining: true })]);
    expect(await status()).toBe('unloading');
    await heartbeatNode(app, 'n1', [
      catalogPool({ pool_id: 'a', state: 'failed', ready: false, last_error: 'fetch: 404' }),
    ]);
    expect(await model(app, 'qwen')).toMatchObject({ status: 'failed', last_error: 'fetch: 404' });
    await heartbeatNode(app, 'n1', []);
    expect(await status()).toBe('registered');
    // a static pool of the model pins it
    await heartbeatNode(app, 'n1', [snapshot({ pool_id: 'yaml', models: [REF] })]);
    expect(await model(app, REF)).toMatchObject({ status: 'ready', pinned: true });
  });

  it('load: the node with the most room is asked with the bearer token; the model is loading at once; a second load is a no-op; max_loaded is a 409', async () => {
    const app = await makeApp();
    const small = await node();
    const big = await node();
    await registerOnDemand(app, 'small', small.url, { budget_bytes: 8 * GiB, used_bytes: 6 * GiB });
    await registerOnDemand(app, 'big', big.url, { budget_bytes: 8 * GiB, used_bytes: 1 * GiB });
    expect(NodeListSchema.parse((await call(app, 'GET', '/v2/nodes')).json()).nodes.map((n) => n.memory)).toEqual([
      { budget_bytes: 8 * GiB, used_bytes: 1 * GiB },
      { budget_bytes: 8 * GiB, used_bytes: 6 * GiB },
    ]);
    await call(app, 'POST', '/v2/catalog/models', {
      ref: REF,
      aliases: ['qwen'],
      ctx: 4096,
      slots: 2,
      sha256: 'e'.repeat(64),
    });
    const res = await call(app, 'POST', '/v2/catalog/models/qwen/load');
    expect(res.statusCode, res.body).toBe(202);
    expect(ClusterModelSchema.parse(res.json()).status).toBe('loading');
    expect(small.loads).toEqual([]);
    expect(big.loads).toEqual([
      {
        pool_id: expect.stringMatching(/^qwen-7b-q4_k_m-[0-9a-f]{6}$/),
        model: REF,
        sha256: 'e'.repeat(64),
        aliases: ['qwen'],
        ctx: 4096,
        slots: 2,
        gpu: 'off',
        serve: 'generate',
      },
    ]);
    expect(big.auth).toEqual([`Bearer ${TOKEN}`]);
    const poolId = big.loads[0]!.pool_id;
    // asked again while it loads (claimed; then the pool reported preparing): nothing more is asked
    expect((await call(app, 'POST', '/v2/catalog/models/qwen/load')).statusCode).toBe(202);
    await heartbeatNode(app, 'big', [catalogPool({ pool_id: poolId, state: 'provisioning', ready: false })]);
    expect((await call(app, 'POST', `/v2/catalog/models/${encodeURIComponent(REF)}/load`, {})).statusCode).toBe(202);
    expect(big.loads.length + small.loads.length).toBe(1);
    await heartbeatNode(app, 'big', [catalogPool({ pool_id: poolId })]);
    expect((await model(app, 'qwen')).status).toBe('ready');
    const max = await call(app, 'POST', '/v2/catalog/models/qwen/load');
    expect(max.statusCode).toBe(409);
    expect(max.json()).toMatchObject({ code: 'CONFLICT', message: expect.stringContaining('max_loaded is 1') });
    const unknown = await call(app, 'POST', '/v2/catalog/models/nope/load');
    expect([unknown.statusCode, unknown.json().code]).toEqual([404, 'MODEL_NOT_FOUND']);
  });

  it('5 concurrent loads of one model ask one node once (the load claim)', async () => {
    const app = await makeApp();
    const n = await node();
    n.loadDelayMs = 100;
    await registerOnDemand(app, 'n1', n.url, { budget_bytes: 8 * GiB, used_bytes: 0 });
    await call(app, 'POST', '/v2/catalog/models', { ref: REF, aliases: ['qwen'], max_loaded: 4 });
    const answers = await Promise.all(
      ['qwen', 'qwen', REF, 'qwen', REF].map((name) =>
        call(app, 'POST', `/v2/catalog/models/${encodeURIComponent(name)}/load`),
      ),
    );
    expect(answers.map((a) => a.statusCode)).toEqual([202, 202, 202, 202, 202]);
    expect(n.loads).toHaveLength(1);
  });

  it('a node without room is refused by itself: the next is asked; when all refuse, 503 INSUFFICIENT_MEMORY; a node that loads nothing on request is a 409', async () => {
    const app = await makeApp();
    await call(app, 'POST', '/v2/catalog/models', { ref: REF, aliases: ['qwen'] });
    const none = await call(app, 'POST', '/v2/catalog/models/qwen/load');
    expect(none.statusCode).toBe(503);
    expect(none.json()).toMatchObject({ code: 'INSUFFICIENT_MEMORY', retriable: true });
    expect(Number(none.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const full = await node();
    const roomy = await node();
    full.answerLoad = () => refusal(503, 'INSUFFICIENT_MEMORY', 'needs 5 GiB, 4 GiB free');
    roomy.answerLoad = () => refusal(503, 'INSUFFICIENT_MEMORY', 'needs 5 GiB, 3 GiB free');
    await registerOnDemand(app, 'full', full.url, { budget_bytes: 8 * GiB, used_bytes: 4 * GiB });
    await registerOnDemand(app, 'roomy', roomy.url, { budget_bytes: 8 * GiB, used_bytes: 5 * GiB });
    await registerOnDemand(app, 'static-only', 'http://127.0.0.1:9', undefined);
    const refused = await call(app, 'POST', '/v2/catalog/models/qwen/load');
    expect(refused.statusCode).toBe(503);
    expect(refused.json()).toMatchObject({
      code: 'INSUFFICIENT_MEMORY',
      message: expect.stringMatching(/full: .*roomy: /),
    });
    expect([full.loads.length, roomy.loads.length]).toEqual([1, 1]);
    // the claim was given back: the next try asks again, and the first node that accepts has it
    roomy.answerLoad = (body) => ({ status: 202, body: { pool_id: body.pool_id } });
    expect((await call(app, 'POST', '/v2/catalog/models/qwen/load')).statusCode).toBe(202);
    expect([full.loads.length, roomy.loads.length]).toEqual([2, 2]);
    const noDemand = await call(app, 'POST', '/v2/catalog/models/qwen/load', { node: 'static-only' });
    expect(noDemand.json()).toMatchObject({ code: 'CONFLICT' });
    expect((await call(app, 'POST', '/v2/catalog/models/qwen/load', { node: 'ghost' })).statusCode).toBe(404);
  });

  it('a load whose pool fails is recorded: the model lists failed with why, also once the node dropped the pool; the next load clears it', async () => {
    const app = await makeApp();
    const n = await node();
    await registerOnDemand(app, 'n1', n.url, { budget_bytes: 8 * GiB, used_bytes: 0 });
    await call(app, 'POST', '/v2/catalog/models', { ref: REF, aliases: ['qwen'] });
    expect((await call(app, 'POST', '/v2/catalog/models/qwen/load')).statusCode).toBe(202);
    const poolId = n.loads[0]!.pool_id;
    await heartbeatNode(app, 'n1', [catalogPool({ pool_id: poolId, state: 'provisioning', ready: false })]);
    await heartbeatNode(app, 'n1', [
      catalogPool({ pool_id: poolId, state: 'failed', ready: false, last_error: 'sha256 mismatch' }),
    ]);
    let failed: ClusterModel | undefined;
    const deadline = Date.now() + 5000;
    await heartbeatNode(app, 'n1', []);
    while (Date.now() < deadline) {
      failed = await model(app, 'qwen');
      if (failed.status === 'failed') break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(failed).toMatchObject({ status: 'failed', last_error: 'sha256 mismatch', pools: [] });
    const again = await call(app, 'POST', '/v2/catalog/models/qwen/load');
    expect(again.statusCode).toBe(202);
    expect(ClusterModelSchema.parse(again.json())).toMatchObject({ status: 'loading' });
    expect(again.json().last_error).toBeUndefined();
    expect(n.loads).toHaveLength(2);
  });

  it('unload: idle catalog copies drain first, never below the pin (409 with why); static pools are not unloaded', async () => {
    const app = await makeApp();
    const n = await node();
    await call(app, 'POST', '/v2/catalog/models', { ref: REF, aliases: ['qwen'], pin: 1, max_loaded: 3 });
    await registerOnDemand(app, 'n1', n.url, { budget_bytes: 8 * GiB, used_bytes: 4 * GiB }, [
      catalogPool({ pool_id: 'busy' }),
      catalogPool({ pool_id: 'idle', idle_since: '2026-01-01T00:00:00.000Z' }),
      snapshot({ pool_id: 'yaml', models: ['static-model'] }),
    ]);
    const res = await call(app, 'POST', '/v2/catalog/models/qwen/unload', { deadline_ms: 5000 });
    expect(res.statusCode, res.body).toBe(202);
    expect(n.unloads).toEqual([{ pool_id: 'idle', deadline_ms: 5000 }]);
    expect(n.auth).toEqual([`Bearer ${TOKEN}`]);
    expect(ClusterModelSchema.parse(res.json())).toMatchObject({ status: 'ready', pools: ['n1/busy', 'n1/idle'] });
    const pinned = await call(app, 'POST', '/v2/catalog/models/qwen/unload');
    expect(pinned.statusCode).toBe(409);
    expect(pinned.json()).toMatchObject({ code: 'CONFLICT', message: expect.stringContaining('pin 1') });
    expect(n.unloads).toHaveLength(1);
    const yaml = await call(app, 'POST', '/v2/catalog/models/static-model/unload');
    expect(yaml.json()).toMatchObject({ code: 'CONFLICT', message: expect.stringContaining('static pools') });
    // without the pin, the last copy goes too, and the model is unloading
    await call(app, 'POST', '/v2/catalog/models', { ref: REF, aliases: ['qwen'], pin: 0 });
    expect((await call(app, 'POST', '/v2/catalog/models/qwen/unload', { node: 'n1' })).json()).toMatchObject({
      status: 'unloading',
    });
    expect(n.unloads.map((u) => [u.pool_id, u.deadline_ms])).toEqual([
      ['idle', 5000],
      ['busy', 30_000],
    ]);
  });
});

describe('fleet catalog across replicas (redis store)', () => {
  const stores = storeHarness('redis');
  const apps: TestApp[] = [];
  let n: OnDemandNode | undefined;
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
    await n?.close();
  });

  it('a registration on one replica is read on another; loads asked on 3 replicas at once ask the node once', async () => {
    const shared = await stores.open(3, { heartbeat_interval_ms: 200 });
    for (const s of shared)
      apps.push(await makeTestApp({ heartbeat_interval_ms: 200 }, {}, undefined, undefined, { store: async () => s }));
    const [a, b, c] = apps as [TestApp, TestApp, TestApp];
    n = await onDemandNode();
    n.loadDelayMs = 100;
    await registerOnDemand(a, 'n1', n.url, { budget_bytes: 8 * GiB, used_bytes: 0 });
    // online on every replica (a node still registering takes no load)
    await waitFor(
      () => [b, c].every((r) => r.app.services.registry.nodeState('n1') === 'online'),
      5000,
      'the node online on every replica',
    );
    expect(
      (
        await b.app.inject({
          method: 'POST',
          url: '/v2/catalog/models',
          headers: b.auth,
          payload: { ref: REF, aliases: ['qwen'], max_loaded: 3 },
        })
      ).statusCode,
    ).toBe(201);
    const seen = await c.app.inject({ method: 'GET', url: '/v2/catalog/models/qwen', headers: c.auth });
    expect(seen.json()).toMatchObject({ id: REF, status: 'registered' });
    const answers = await Promise.all(
      [a, b, c, a, b, c].map((r) =>
        r.app.inject({ method: 'POST', url: '/v2/catalog/models/qwen/load', headers: r.auth }),
      ),
    );
    expect(answers.map((r) => r.statusCode)).toEqual([202, 202, 202, 202, 202, 202]);
    expect(n.loads).toHaveLength(1);
    // every replica shows the load in flight (the claim), before any heartbeat lists the pool
    for (const r of [a, b, c])
      expect(
        (await r.app.inject({ method: 'GET', url: '/v2/catalog/models/qwen', headers: r.auth })).json().status,
      ).toBe('loading');
  });
});

describe('fleet catalog: who may change it', () => {
  let app: OrchdApp | undefined;
  let closeUpstream: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await app?.close();
    await closeUpstream?.();
  });

  it('a client key reads the catalog; registering, deleting, loading and unloading take an operator key (403)', async () => {
    const sha = (s: string) => createHash('sha256').update(s).digest('hex');
    const CLIENT = 'client-key-0123456789abcdef';
    const OPS = 'ops-key-0123456789abcdef';
    const config = OrchestratorConfigSchema.parse({
      node_token: 'node-token-0123456789abcdef',
      keys_file: '/keys.yaml',
      heartbeat_interval_ms: 1000,
    });
    const keys = `keys:\n  - name: c\n    key_sha256: ${sha(CLIENT)}\n  - name: ops\n    key_sha256: ${sha(OPS)}\n    role: operator\n`;
    const credentials = loadCredentials({ config, env: {}, readFile: () => keys });
    const upstream = createUpstreamDispatchers();
    closeUpstream = () => upstream.close();
    app = await buildApp({ logger: captureLogger().logger, upstream: upstream.http1, credentials }, config);
    const as = (key: string, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
      app!.inject({ method, url, headers: { authorization: `Bearer ${key}` }, ...(payload ? { payload } : {}) });
    expect((await as(OPS, 'POST', '/v2/catalog/models', { ref: 'm' })).statusCode).toBe(201);
    expect((await as(CLIENT, 'GET', '/v2/catalog/models')).statusCode).toBe(200);
    expect((await as(CLIENT, 'GET', '/v2/catalog/models/m')).statusCode).toBe(200);
    for (const [method, url, payload] of [
      ['POST', '/v2/catalog/models', { ref: 'x' }],
      ['DELETE', '/v2/catalog/models/m', undefined],
      ['POST', '/v2/catalog/models/m/load', {}],
      ['POST', '/v2/catalog/models/m/unload', {}],
    ] as const)
      expect((await as(CLIENT, method, url, payload)).statusCode, `${method} ${url}`).toBe(403);
    // past auth with an operator key: no node takes loads here
    expect((await as(OPS, 'POST', '/v2/catalog/models/m/load', {})).json()).toMatchObject({
      code: 'INSUFFICIENT_MEMORY',
    });
  });
});

describe('fleet catalog with ORCHD_STATE_DIR (in-process store)', () => {
  it('entries, their aliases and policy survive a restart of orchestratord', async () => {
    const stateDir = await mkdtemp(join(tmpdir(), 'orchd-state-'));
    let t: TestApp | undefined;
    try {
      t = await makeTestApp({ state_dir: stateDir });
      const reg = await t.app.inject({
        method: 'POST',
        url: '/v2/catalog/models',
        headers: t.auth,
        payload: { ref: 'hf:org/repo/kept.gguf', sha256: 'b'.repeat(64), aliases: ['kept'], pin: 2 },
      });
      expect(reg.statusCode).toBe(201);
      await t.close();
      t = await makeTestApp({ state_dir: stateDir });
      const list = ClusterModelListSchema.parse(
        (await t.app.inject({ method: 'GET', url: '/v2/catalog/models', headers: t.auth })).json(),
      );
      expect(list.models).toEqual([
        {
          id: 'hf:org/repo/kept.gguf',
          ref: 'hf:org/repo/kept.gguf',
          status: 'registered',
          pools: [],
          aliases: ['kept'],
          registered: true,
          pinned: true,
          sha256: 'b'.repeat(64),
          policy: expect.objectContaining({ pin: 2 }),
        },
      ]);
    } finally {
      await t?.close();
      await rm(stateDir, { recursive: true, force: true });
    }
  });
});
