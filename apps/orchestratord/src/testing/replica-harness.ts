// Test-only: orchestratord apps sharing one real redis-server, as replicas of one cluster.
import { createHash } from 'node:crypto';
import { OrchestratorConfigSchema } from '@llama-orch/contracts';
import { systemClock } from '@llama-orch/daemon-support';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { buildApp, type AppDeps, type OrchdApp } from '../app.js';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { loadCredentials } from '../http/credentials.js';
import { storeSettingsOf, type SharedStore } from '../store/cluster-store.js';
import { createClusterStore } from '../store/create-cluster-store.js';
import { createUpstreamDispatchers } from '../upstream/dispatchers.js';
import { REDIS_INSTALL_TIMEOUT_MS, startRedisServer, type RedisServerHandle } from './redis-server.js';
import { sharedStore, sleep } from './store-harness.js';
import { captureLogger } from './test-helpers.js';

/** The heartbeat interval of the cluster suites' replicas and nodes, ms: long enough that a loaded 2-core machine keeps up. */
export const CLUSTER_HEARTBEAT_MS = 250;

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
export const BOB = 'bob-key-0123456789abcdef-env';
export const ANN = 'ann-key-0123456789abcdef-env';
export const NODE = 'node-token-0123456789abcdef';
/** Two tenants' client keys without limits (tenant isolation across replicas). */
export const CAT = 'cat-key-0123456789abcdef-env';
export const DAN = 'dan-key-0123456789abcdef-env';
/** The keys file every replica reads (ann an operator, bob rate-limited, cat and dan plain clients): a replica run as a process gets it as ORCHD_KEYS_FILE. */
export const KEYS = `keys:
  - name: bob
    key_sha256: ${sha(BOB)}
    rate_limit: 3
  - name: ann
    key_sha256: ${sha(ANN)}
    role: operator
  - name: cat
    key_sha256: ${sha(CAT)}
  - name: dan
    key_sha256: ${sha(DAN)}
`;
export const bearer = { authorization: `Bearer ${BOB}` };
export const annAuth = { authorization: `Bearer ${ANN}` };
export const nodeAuth = { authorization: `Bearer ${NODE}` };

export interface Replica {
  readonly app: OrchdApp;
  readonly store: SharedStore;
  readonly logs: ReturnType<typeof captureLogger>;
}

export interface ReplicaHarness {
  /** A replica of the cluster `prefix` (its own store connection, dispatchers and app; `deps` more of the app's). Closed after the test. */
  replica(prefix: string, over?: Record<string, unknown>, deps?: Pick<AppDeps, 'tracing'>): Promise<Replica>;
  /** Runs after the test, before the replicas close (latest first). */
  defer(cleanup: () => Promise<unknown>): void;
  server(): RedisServerHandle;
}

/**
 * Registers the hooks of one `describe` block: a redis-server for the block (with `aofDir`, one
 * that keeps an append-only file there), every replica closed after each test.
 */
export function replicaHarness(options: { aofDir?: string } = {}): ReplicaHarness {
  let server: RedisServerHandle | undefined;
  const cleanup: Array<() => Promise<unknown>> = [];
  let seq = 0;
  beforeAll(async () => {
    server = await startRedisServer(options);
  }, REDIS_INSTALL_TIMEOUT_MS);
  afterAll(async () => {
    await server?.stop();
  });
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });
  return {
    async replica(prefix, over = {}, deps = {}) {
      // Replicas in one process would all default to <hostname>-<pid>: each gets its own id.
      seq += 1;
      const replicaId = `r${seq}`;
      const config = OrchestratorConfigSchema.parse({
        keys_file: '/k.yaml',
        node_token: NODE,
        redis_url: server?.url,
        redis_prefix: prefix,
        replica_id: replicaId,
        ...over,
      });
      const credentials = loadCredentials({ config, env: {}, readFile: () => KEYS });
      const logs = captureLogger();
      const store = sharedStore(
        await createClusterStore(storeSettingsOf(config), { clock: systemClock, logger: logs.logger }),
      );
      cleanup.push(() => store.close());
      const upstream = createUpstreamDispatchers();
      cleanup.push(() => upstream.close());
      const app = await buildApp(
        { logger: logs.logger, upstream: upstream.http1, upstreamH2c: upstream.h2c, credentials, store, ...deps },
        config,
      );
      cleanup.push(() => app.close());
      return { app, store, logs };
    },
    defer(c) {
      cleanup.push(c);
    },
    server() {
      if (server === undefined) throw new Error('redis-server not started');
      return server;
    },
  };
}

export async function until(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
  const start = Date.now();
  while (!(await cond())) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/**
 * `n` replicas of the cluster `prefix` listening, and a FIXTURE node with one 1-slot pool (`p`,
 * model `m`) registered with the first and heartbeating (200 ms) to the last, seen online by all.
 */
export async function fixtureCluster(
  h: ReplicaHarness,
  prefix: string,
  n: number,
  options: { over?: Record<string, unknown>; tokenIntervalMs?: number } = {},
): Promise<{ replicas: Replica[]; node: FixturePoolManager }> {
  const replicas = await Promise.all(
    Array.from({ length: n }, () =>
      h.replica(prefix, { heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS, ...options.over }),
    ),
  );
  const urls: string[] = [];
  for (const r of replicas) urls.push(await r.app.listen({ port: 0, host: '127.0.0.1' }));
  const node = await FixturePoolManager.start({
    nodeId: 'n1',
    pools: [{ pool_id: 'p', models: ['m'], slots: 1 }],
    token: NODE,
    tokenIntervalMs: options.tokenIntervalMs ?? 2,
  });
  h.defer(() => node.close());
  const registered = await node.register(urls[0]!);
  if (registered !== 200) throw new Error(`the fixture node's registration answered ${registered}`);
  await node.startHeartbeats(urls[n - 1]!, 200);
  h.defer(() => Promise.resolve(node.stopHeartbeats()));
  await until(
    () => replicas.every((r) => r.app.services.registry.poolsForModel('m')[0]?.node_state === 'online'),
    'every replica to see n1 online',
  );
  return { replicas, node };
}
