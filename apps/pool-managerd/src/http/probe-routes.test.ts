import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { request } from 'undici';
import { LivenessSchema, ManagerReadinessSchema, PoolConfigSchema } from '@llama-orch/contracts';
import { EngineProvisioner } from '@llama-orch/engine-provisioner';
import { ModelProvisioner } from '@llama-orch/model-provisioner';
import { buildApp, type PoolManagerApp } from '../app.js';
import { PoolManager } from '../pools/pool-manager.js';
import { DEFAULT_SUPERVISION } from '../supervision/settings.js';
import { runtimeDir } from '../support/runtime-dir.js';

const TOKEN = 'probe-test-token-0123456789abcdef';
let dir: string;
let app: PoolManagerApp;
let manager: PoolManager;

// Two pools that never start (start() is not called): the test moves their states by hand.
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'pm-probe-'));
  const logger = pino({ level: 'silent' });
  manager = new PoolManager({
    nodeId: 'n1',
    pools: [
      PoolConfigSchema.parse({ id: 'p0', model: 'synthetic:llama' }),
      PoolConfigSchema.parse({ id: 'p1', model: 'synthetic:llama' }),
    ],
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

describe('pool-managerd probes', () => {
  it('/healthz answers without a token; /health still needs it', async () => {
    const res = await app.inject({ method: 'GET', url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(LivenessSchema.parse(res.json())).toEqual({ status: 'ok' });
    expect(res.headers['x-correlation-id']).toBeDefined();
    expect((await app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(401);
  });

  it('/readyz: not ready before listening and during first provisioning; a failed pool is reported, not a cause', async () => {
    const before = await app.inject({ method: 'GET', url: '/readyz' });
    expect(before.statusCode).toBe(503);
    expect(ManagerReadinessSchema.parse(before.json()).reason).toBe('not listening');

    await app.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}/readyz`;
    const get = async () => {
      const res = await request(url);
      return {
        status: res.statusCode,
        body: ManagerReadinessSchema.parse(await res.body.json()),
        retryAfter: res.headers['retry-after'],
      };
    };

    let r = await get();
    expect(r.status).toBe(503);
    expect(r.retryAfter).toBe('1');
    expect(r.body).toEqual({
      status: 'not_ready',
      node_id: 'n1',
      reason: 'pools still in their first provisioning: p0, p1',
      pools: {
        p0: { state: 'provisioning', first_provisioning: true },
        p1: { state: 'provisioning', first_provisioning: true },
      },
      failed: [],
    });

    manager.pools.transition('p0', 'starting');
    manager.pools.transition('p0', 'ready');
    manager.pools.setLastError('p1', 'model fetch failed: 404');
    manager.pools.transition('p1', 'failed', 'provisioning failed');
    r = await get();
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      status: 'ready',
      node_id: 'n1',
      pools: {
        p0: { state: 'ready', first_provisioning: false },
        p1: { state: 'failed', first_provisioning: false, last_error: 'model fetch failed: 404' },
      },
      failed: ['p1'],
    });

    // A later restart (ready → starting) is not a first provisioning: the node stays ready.
    manager.pools.transition('p0', 'starting', 'engine exited; restarting');
    r = await get();
    expect(r.status).toBe(200);
    expect(r.body.pools.p0).toEqual({ state: 'starting', first_provisioning: false });
  });
});

describe('pool-managerd /openapi.json', () => {
  it('serves its generated document without a token', async () => {
    const res = await app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    const doc = res.json<{ openapi: string; paths: Record<string, unknown> }>();
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/health',
        '/healthz',
        '/readyz',
        '/v2/pools',
        '/v2/pools/{id}/completions',
        '/openapi.json',
      ]),
    );
    expect((await app.inject({ method: 'GET', url: '/openapi.json' })).body).toBe(res.body);
  });
});
