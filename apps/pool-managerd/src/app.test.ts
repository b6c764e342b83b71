import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import {
  ErrorEnvelopeSchema,
  ManagerHealthSchema,
  PoolConfigSchema,
  PoolStatusListSchema,
} from '@llama-orch/contracts';
import { EngineProvisioner } from '@llama-orch/engine-provisioner';
import { ModelProvisioner } from '@llama-orch/model-provisioner';
import { Agent, H2CClient } from 'undici';
import { buildApp, buildDispatchApp, type PoolManagerApp } from './app.js';
import { DEFAULT_SUPERVISION } from './supervision/settings.js';
import { PoolManager } from './pools/pool-manager.js';
import { runtimeDir } from './support/runtime-dir.js';

const TOKEN = 'app-test-token-0123456789abcdef';
let dir: string;
let app: PoolManagerApp;
let manager: PoolManager;

// HTTP surface without a running engine: the pool stays `provisioning` (start() is never called).
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'pm-app-'));
  const logger = pino({ level: 'silent' });
  manager = new PoolManager({
    nodeId: 'n1',
    pools: [PoolConfigSchema.parse({ id: 'p0', model: 'synthetic:llama' })],
    runtime: runtimeDir(join(dir, 'run')),
    logger,
    engines: new EngineProvisioner({ cacheDir: join(dir, 'cache'), logger, env: {} }),
    models: new ModelProvisioner({ cacheDir: join(dir, 'cache'), logger, progressTty: false }),
    engineEnv: {},
    wrapper: [],
    supervision: { ...DEFAULT_SUPERVISION },
  });
  app = await buildApp({ manager, logger, apiToken: TOKEN }, { node: { id: 'n1', addr: '127.0.0.1:0' } });
});

afterAll(async () => {
  await app.close();
  await manager.close();
  rmSync(dir, { recursive: true, force: true });
});

const auth = { authorization: `Bearer ${TOKEN}` };

describe('pool-managerd HTTP API', () => {
  it('GET /health reports pool states (Bearer, like every route but /metrics)', async () => {
    expect((await app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(401);
    const res = await app.inject({ method: 'GET', url: '/health', headers: auth });
    expect(res.statusCode).toBe(200);
    expect(ManagerHealthSchema.parse(res.json())).toEqual({
      status: 'ok',
      node_id: 'n1',
      pools: { p0: 'provisioning' },
    });
    expect(res.headers['x-correlation-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('protected routes answer a JSON 401 with the echoed correlation id', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong-token-wrong-token' }, { authorization: TOKEN }]) {
      const res = await app.inject({
        method: 'GET',
        url: '/v2/pools',
        headers: { ...headers, 'x-correlation-id': 'corr-1' },
      });
      expect(res.statusCode).toBe(401);
      expect(ErrorEnvelopeSchema.parse(res.json()).code).toBe('UNAUTHORIZED');
      expect(res.headers['x-correlation-id']).toBe('corr-1');
    }
  });

  it('GET /v2/pools and /v2/pools/{id}', async () => {
    const res = await app.inject({ method: 'GET', url: '/v2/pools', headers: auth });
    expect(res.statusCode).toBe(200);
    const { pools } = PoolStatusListSchema.parse(res.json());
    expect(pools).toHaveLength(1);
    expect(pools[0]).toMatchObject({
      pool_id: 'p0',
      state: 'provisioning',
      ready: false,
      live: false,
      slots_free: 0,
      breaker: 'closed',
      models: ['synthetic:llama'],
    });
    const one = await app.inject({ method: 'GET', url: '/v2/pools/p0', headers: auth });
    expect(one.json()).toMatchObject({ pool_id: 'p0' });
    const missing = await app.inject({ method: 'GET', url: '/v2/pools/nope', headers: auth });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('dispatch to a pool that is not ready is a 503 POOL_UNREADY with backoff headers', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v2/pools/p0/completions',
      headers: auth,
      payload: { task_id: '5f0c6f8e-8f0e-4e43-9d61-3b8a4f9b8c11', prompt: 'hi', max_tokens: 4 },
    });
    expect(res.statusCode).toBe(503);
    expect(ErrorEnvelopeSchema.parse(res.json())).toMatchObject({ code: 'POOL_UNREADY', retriable: true });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(res.headers['x-backoff-ms'])).toBeGreaterThan(0);
    const unknown = await app.inject({
      method: 'POST',
      url: '/v2/pools/nope/completions',
      headers: auth,
      payload: { task_id: '5f0c6f8e-8f0e-4e43-9d61-3b8a4f9b8c11', prompt: 'hi', max_tokens: 4 },
    });
    expect(unknown.statusCode).toBe(404);
  });

  it('invalid bodies are 400 INVALID_PARAMS naming the field', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v2/pools/p0/completions',
      headers: auth,
      payload: { task_id: 'not-a-uuid', prompt: 'hi', max_tokens: 0, extra: 1 },
    });
    expect(res.statusCode).toBe(400);
    const body = ErrorEnvelopeSchema.parse(res.json());
    expect(body.code).toBe('INVALID_PARAMS');
    expect(body.message).toMatch(/task_id/);
    expect(body.message).toMatch(/max_tokens/);
    const bad = await app.inject({
      method: 'POST',
      url: '/v2/pools/p0/drain',
      headers: { ...auth, 'content-type': 'application/json' },
      payload: '{"deadline_ms": ',
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'INVALID_PARAMS' });
  });

  it('a node without on_demand loads nothing on request: POST /v2/pools is a 409 CONFLICT (counted refused); its YAML pool is not unloaded', async () => {
    const load = { pool_id: 'od', model: 'synthetic:llama' };
    expect((await app.inject({ method: 'POST', url: '/v2/pools', payload: load })).statusCode).toBe(401);
    const res = await app.inject({ method: 'POST', url: '/v2/pools', headers: auth, payload: load });
    expect(res.statusCode).toBe(409);
    expect(ErrorEnvelopeSchema.parse(res.json())).toMatchObject({ code: 'CONFLICT', retriable: false });
    expect(res.json<{ message: string }>().message).toMatch(/loads no model on request: its config has no on_demand/);
    expect(res.headers['retry-after']).toBeUndefined();
    expect((await app.inject({ method: 'GET', url: '/v2/pools/od', headers: auth })).statusCode).toBe(404);
    const metrics = await app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.body).toMatch(/^llorch_pool_loads_total\{outcome="refused"\} 1$/m);
    const del = await app.inject({ method: 'DELETE', url: '/v2/pools/p0', headers: auth });
    expect(del.statusCode).toBe(409);
    expect(del.json()).toMatchObject({ code: 'CONFLICT' });
    expect((await app.inject({ method: 'DELETE', url: '/v2/pools/od', headers: auth })).statusCode).toBe(404);
  });

  it('GET /metrics is public Prometheus text from the app registry', async () => {
    const res = await app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/plain/);
    expect(res.body).toMatch(/llorch_pool_slots\{pool_id="p0"\} 1/);
    expect(res.body).toMatch(/llorch_pool_slots_free\{pool_id="p0"\} 0/);
    expect(res.body).toMatch(/llorch_pool_breaker_state\{pool_id="p0"\} 0/);
  });

  it('the h2c dispatch listener serves the dispatch route alone over HTTP/2, with the same auth and envelopes', async () => {
    const h2 = await buildDispatchApp(
      { manager, logger: pino({ level: 'silent' }), apiToken: TOKEN },
      { node: { id: 'n1', addr: '127.0.0.1:0' } },
    );
    const agent = new Agent({ factory: (origin, opts) => new H2CClient(origin, opts) });
    try {
      await h2.listen({ host: '127.0.0.1', port: 0 });
      const address = h2.server.address();
      const origin = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
      const body = JSON.stringify({ task_id: '5f0c6f8e-8f0e-4e43-9d61-3b8a4f9b8c11', prompt: 'hi', max_tokens: 4 });
      const post = (path: string, headers: Record<string, string>) =>
        agent.request({
          origin,
          path,
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body,
        });
      const unready = await post('/v2/pools/p0/completions', { ...auth, 'x-correlation-id': 'h2-1' });
      expect(ErrorEnvelopeSchema.parse(await unready.body.json())).toMatchObject({
        code: 'POOL_UNREADY',
        retriable: true,
      });
      expect(unready.statusCode).toBe(503);
      expect(unready.headers['x-correlation-id']).toBe('h2-1');
      const noAuth = await post('/v2/pools/p0/completions', {});
      expect(noAuth.statusCode).toBe(401);
      await noAuth.body.dump();
      const other = await agent.request({ origin, path: '/v2/pools', method: 'GET', headers: auth });
      expect(other.statusCode).toBe(404);
      await other.body.dump();
    } finally {
      await agent.close();
      await h2.close();
    }
  });
});
