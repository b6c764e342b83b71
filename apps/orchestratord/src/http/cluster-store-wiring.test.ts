import { createHash } from 'node:crypto';
import { ErrorEnvelopeSchema, OrchestratorConfigSchema, ReadinessSchema } from '@llama-orch/contracts';
import { systemClock } from '@llama-orch/daemon-support';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type OrchdApp } from '../app.js';
import { storeSettingsOf, type ClusterStore } from '../store/cluster-store.js';
import { createClusterStore } from '../store/create-cluster-store.js';
import { REDIS_INSTALL_TIMEOUT_MS, startRedisServer, type RedisServerHandle } from '../testing/redis-server.js';
import { captureLogger } from '../testing/test-helpers.js';
import { sleep } from '../testing/store-harness.js';
import { createUpstreamDispatchers } from '../upstream/dispatchers.js';
import { loadCredentials } from './credentials.js';

const BOB = 'bob-key-0123456789abcdef-env';
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const KEYS = `keys:
  - name: bob
    key_sha256: ${sha(BOB)}
    rate_limit: 3
`;
const bearer = { authorization: `Bearer ${BOB}` };

// What is wired to the cluster store in this version: per-key rate limits and /readyz.
describe('orchestratord replicas sharing a Redis store', () => {
  let server: RedisServerHandle;
  const cleanup: Array<() => Promise<unknown>> = [];
  beforeAll(async () => {
    server = await startRedisServer();
  }, REDIS_INSTALL_TIMEOUT_MS);
  afterAll(async () => {
    await server.stop();
  });
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  async function replica(prefix: string): Promise<{ app: OrchdApp; store: ClusterStore }> {
    const config = OrchestratorConfigSchema.parse({ keys_file: '/k.yaml', node_token: 'node-token-0123456789abcdef', redis_url: server.url, redis_prefix: prefix });
    const credentials = loadCredentials({ config, env: {}, readFile: () => KEYS });
    const logs = captureLogger();
    const store = await createClusterStore(storeSettingsOf(config), { clock: systemClock, logger: logs.logger });
    cleanup.push(() => store.close());
    const upstream = createUpstreamDispatchers();
    cleanup.push(() => upstream.close());
    const app = await buildApp({ logger: logs.logger, upstream: upstream.http1, upstreamH2c: upstream.h2c, credentials, store }, config);
    cleanup.push(() => app.close());
    return { app, store };
  }

  it('a key limited to 3 a minute gets 3 across 3 replicas, not 9', async () => {
    const replicas = await Promise.all([replica('rl:'), replica('rl:'), replica('rl:')]);
    const codes: number[] = [];
    for (let i = 0; i < 9; i += 1) codes.push((await replicas[i % 3]!.app.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer })).statusCode);
    expect(codes.filter((c) => c === 200)).toHaveLength(3);
    expect(codes.slice(3)).toEqual([429, 429, 429, 429, 429, 429]);
    const refused = await replicas[1]!.app.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer });
    expect(ErrorEnvelopeSchema.parse(refused.json())).toMatchObject({ code: 'ADMISSION_REJECT', policy_label: 'rate_limit' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(50);
    // another cluster (prefix) on the same Redis counts apart
    const other = await replica('other:');
    expect((await other.app.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer })).statusCode).toBe(200);
  });

  it('/readyz turns not ready while Redis is unreachable and ready again once it is back; rate-limited requests fail typed meanwhile', async () => {
    const { app } = await replica('ready:');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const ready = async () => ReadinessSchema.parse((await app.inject({ method: 'GET', url: '/readyz' })).json());
    const until = async (want: 'ready' | 'not_ready') => {
      for (let i = 0; i < 60 && (await ready()).status !== want; i += 1) await sleep(100);
      return ready();
    };
    expect(await until('ready')).toEqual({ status: 'ready' });
    await server.kill();
    const down = await until('not_ready');
    expect(down.reason).toMatch(/^cluster store unreachable/);
    const r = await app.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer });
    expect(r.statusCode).toBe(500);
    expect(ErrorEnvelopeSchema.parse(r.json())).toMatchObject({ code: 'INTERNAL', retriable: true });
    await server.restart();
    expect(await until('ready')).toEqual({ status: 'ready' });
    expect((await app.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer })).statusCode).toBe(200);
  });
});
