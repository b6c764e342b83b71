// Test-only: orchestratord apps sharing one real redis-server, as replicas of one cluster.
import { createHash } from 'node:crypto';
import { OrchestratorConfigSchema } from '@llama-orch/contracts';
import { systemClock } from '@llama-orch/daemon-support';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { buildApp, type OrchdApp } from '../app.js';
import { loadCredentials } from '../http/credentials.js';
import { storeSettingsOf, type ClusterStore } from '../store/cluster-store.js';
import { createClusterStore } from '../store/create-cluster-store.js';
import { createUpstreamDispatchers } from '../upstream/dispatchers.js';
import { REDIS_INSTALL_TIMEOUT_MS, startRedisServer, type RedisServerHandle } from './redis-server.js';
import { sleep } from './store-harness.js';
import { captureLogger } from './test-helpers.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
export const BOB = 'bob-key-0123456789abcdef-env';
export const ANN = 'ann-key-0123456789abcdef-env';
export const NODE = 'node-token-0123456789abcdef';
const KEYS = `keys:
  - name: bob
    key_sha256: ${sha(BOB)}
    rate_limit: 3
  - name: ann
    key_sha256: ${sha(ANN)}
    role: operator
`;
export const bearer = { authorization: `Bearer ${BOB}` };
export const annAuth = { authorization: `Bearer ${ANN}` };
export const nodeAuth = { authorization: `Bearer ${NODE}` };

export interface Replica {
  readonly app: OrchdApp;
  readonly store: ClusterStore;
  readonly logs: ReturnType<typeof captureLogger>;
}

export interface ReplicaHarness {
  /** A replica of the cluster `prefix` (its own store connection, dispatchers and app). Closed after the test. */
  replica(prefix: string, over?: Record<string, unknown>): Promise<Replica>;
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
    async replica(prefix, over = {}) {
      // Replicas in one process would all default to <hostname>-<pid>: each gets its own id.
      seq += 1;
      const replicaId = `r${seq}`;
      const config = OrchestratorConfigSchema.parse({ keys_file: '/k.yaml', node_token: NODE, redis_url: server?.url, redis_prefix: prefix, replica_id: replicaId, ...over });
      const credentials = loadCredentials({ config, env: {}, readFile: () => KEYS });
      const logs = captureLogger();
      const store = await createClusterStore(storeSettingsOf(config), { clock: systemClock, logger: logs.logger });
      cleanup.push(() => store.close());
      const upstream = createUpstreamDispatchers();
      cleanup.push(() => upstream.close());
      const app = await buildApp({ logger: logs.logger, upstream: upstream.http1, upstreamH2c: upstream.h2c, credentials, store }, config);
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
