// Two orchestratord replicas (the app factory) on one real redis-server: membership, the
// cluster-wide dashboard and the leader-only cluster gauges (.specs/65-cluster-store.md, Replicas).
import { DashboardSnapshotSchema, OrchestratorConfigSchema, type DashboardSnapshot } from '@llama-orch/contracts';
import { parsePrometheusText, systemClock } from '@llama-orch/daemon-support';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type OrchdApp } from '../app.js';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { storeSettingsOf } from '../store/cluster-store.js';
import { createClusterStore } from '../store/create-cluster-store.js';
import { REDIS_INSTALL_TIMEOUT_MS, startRedisServer, type RedisServerHandle } from '../testing/redis-server.js';
import { sleep } from '../testing/store-harness.js';
import { captureLogger, frames, taskBody, TOKEN } from '../testing/test-helpers.js';
import { createUpstreamDispatchers } from '../upstream/dispatchers.js';

const HB = 200;
const auth = { authorization: `Bearer ${TOKEN}` };
const CLUSTER_GAUGES = ['llorch_nodes_online', 'llorch_pools_available'] as const;

async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string, timeoutMs = 8000): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() - start > timeoutMs)
      throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v).slice(0, 800)}`);
    await sleep(25);
  }
}

describe('orchestratord replicas on one Redis: membership, one dashboard, cluster gauges summed once', () => {
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

  async function replica(
    id: string,
    prefix: string,
  ): Promise<{ app: OrchdApp; url: string; close: () => Promise<void> }> {
    const config = OrchestratorConfigSchema.parse({
      api_token: TOKEN,
      redis_url: server.url,
      redis_prefix: prefix,
      replica_id: id,
      heartbeat_interval_ms: HB,
    });
    const logs = captureLogger('warn');
    const store = await createClusterStore(storeSettingsOf(config), { clock: systemClock, logger: logs.logger });
    cleanup.push(() => store.close());
    const upstream = createUpstreamDispatchers();
    cleanup.push(() => upstream.close());
    const app = await buildApp(
      { logger: logs.logger, upstream: upstream.http1, upstreamH2c: upstream.h2c, store, version: `v-${id}` },
      config,
      { dashboardBucketMs: 250 },
    );
    let closed: Promise<void> | undefined;
    const close = () => (closed ??= app.close());
    cleanup.push(close);
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    return { app, url, close };
  }

  const snapshotOf = async (r: { app: OrchdApp }): Promise<DashboardSnapshot> => {
    const res = await r.app.inject({ method: 'GET', url: '/v2/dashboard', headers: auth });
    expect(res.statusCode, res.body).toBe(200);
    return DashboardSnapshotSchema.parse(res.json());
  };
  const scrape = async (r: { app: OrchdApp }) =>
    parsePrometheusText((await r.app.inject({ method: 'GET', url: '/metrics' })).body).families;
  /** A family's samples summed, as PromQL's `sum()` over both scrapes would. */
  const summed = (scrapes: Awaited<ReturnType<typeof scrape>>[], name: string): number =>
    scrapes
      .flatMap((families) => families.filter((f) => f.name === name).flatMap((f) => f.samples))
      .reduce((n, s) => n + s.value, 0);

  it('each replica lists both (bound addresses, versions); both dashboards show the same recent tasks and throughput; tasks relayed counted per replica', async () => {
    const a = await replica('orchd-a', 'dash:');
    const b = await replica('orchd-b', 'dash:');
    const node = await FixturePoolManager.start({
      nodeId: 'n1',
      pools: [{ pool_id: 'p', models: ['m'], slots: 2 }],
      token: TOKEN,
      tokenIntervalMs: 1,
    });
    cleanup.push(() => node.close());
    await node.startHeartbeats(a.url, HB);
    // B started after A: its first announcement already listed A; A hears of B with its next one
    const replicasOf = async (r: typeof a) => (await snapshotOf(r)).replicas;
    const listed = await until(
      () => replicasOf(a),
      (l) => l.length === 2,
      'A to list both replicas',
    );
    expect(listed.map((r) => [r.replica_id, r.address, r.version])).toEqual([
      ['orchd-a', a.url, 'v-orchd-a'],
      ['orchd-b', b.url, 'v-orchd-b'],
    ]);
    expect((await replicasOf(b)).map((r) => r.replica_id)).toEqual(['orchd-a', 'orchd-b']);
    await until(
      () => snapshotOf(b),
      (s) => s.pools.some((p) => p.pool_id === 'p' && p.node_state === 'online'),
      'B to see the pool',
    );

    // one task through each replica
    const ids: string[] = [];
    for (const r of [a, b]) {
      const task = taskBody({ max_tokens: 5 });
      ids.push(task.task_id as string);
      expect((await r.app.inject({ method: 'POST', url: '/v2/tasks', headers: auth, payload: task })).statusCode).toBe(
        202,
      );
      const events = await r.app.inject({ method: 'GET', url: `/v2/tasks/${task.task_id}/events`, headers: auth });
      expect(frames(events.body).at(-1)?.event).toBe('end');
    }
    // both dashboards: the same two recent tasks (written within 250 ms of their end), whichever replica ran them
    const fromA = await until(
      () => snapshotOf(a),
      (s) => s.recent_tasks.length === 2,
      'A to list both tasks',
    );
    const fromB = await snapshotOf(b);
    expect(fromA.recent_tasks.map((t) => t.task_id).sort()).toEqual([...ids].sort());
    expect(fromB.recent_tasks).toEqual(fromA.recent_tasks);
    // throughput: every replica's closed buckets, summed; the same series from both (once both closed the buckets)
    const tokensIn = (s: DashboardSnapshot) =>
      s.throughput.reduce((n, p) => n + (p.tokens_per_s * s.bucket_ms) / 1000, 0);
    const tpA = await until(
      () => snapshotOf(a),
      (s) => Math.round(tokensIn(s)) === 10 && s.throughput.reduce((n, p) => n + p.tasks_ended, 0) === 2,
      'A to chart both tasks',
    );
    const tpB = await until(
      () => snapshotOf(b),
      (s) => Math.round(tokensIn(s)) === 10,
      'B to chart both tasks',
    );
    const last = tpA.throughput.at(-1)?.t_ms ?? 0;
    expect(tpB.throughput.filter((p) => p.t_ms <= last)).toEqual(
      tpA.throughput.filter((p) => p.t_ms >= (tpB.throughput[0]?.t_ms ?? 0)),
    );
    // tasks relayed: one each, as announced (within an interval)
    const relayed = await until(
      () => replicasOf(b),
      (l) => l.every((r) => r.tasks_relayed === 1),
      'both replicas to announce one relayed task',
    );
    expect(relayed.map((r) => r.load)).toEqual([0, 0]);
  });

  it('the queue section is the cluster queue on both replicas; llorch_queue_depth summed over both is its depth', async () => {
    const a = await replica('orchd-a', 'queue:');
    const b = await replica('orchd-b', 'queue:');
    // one slot, slow tokens: the first task holds it, the rest wait in the cluster's queue
    const node = await FixturePoolManager.start({
      nodeId: 'n1',
      pools: [{ pool_id: 'p', models: ['m'], slots: 1 }],
      token: TOKEN,
      tokenIntervalMs: 200,
    });
    cleanup.push(() => node.close());
    await node.startHeartbeats(a.url, HB);
    for (const r of [a, b])
      await until(
        () => snapshotOf(r),
        (s) => s.pools.some((p) => p.node_state === 'online') && s.replicas.length === 2,
        'pool and replicas',
      );
    const admit = async (r: typeof a) => {
      const res = await r.app.inject({
        method: 'POST',
        url: '/v2/tasks',
        headers: auth,
        payload: taskBody({ max_tokens: 500 }),
      });
      expect(res.statusCode, res.body).toBe(202);
    };
    await admit(a);
    await until(
      () => snapshotOf(a),
      (s) => s.queue.depth.interactive === 0 && node.dispatches.length === 1,
      'the first task running',
    );
    await admit(a);
    await admit(b);
    await admit(b);
    const depthOf = async (r: typeof a) => (await snapshotOf(r)).queue;
    expect((await depthOf(b)).capacity).toBe(1024); // the cluster's (ORCHD_ADMISSION_CAPACITY's default)
    for (const r of [a, b]) {
      // running: the streams the replicas announced (within an interval)
      await until(
        () => depthOf(r),
        (q) => q.depth.interactive === 3 && q.running === 1,
        'the cluster queue on each dashboard',
      );
    }
    const scrapes = await Promise.all([scrape(a), scrape(b)]);
    expect(summed(scrapes, 'llorch_queue_depth')).toBe(3);
  });

  it('Redis down: GET /v2/dashboard answers 503 STORE_UNAVAILABLE (retriable), the replica keeps running; back once Redis is', async () => {
    const a = await replica('orchd-a', 'down:');
    expect((await a.app.inject({ method: 'GET', url: '/v2/dashboard', headers: auth })).statusCode).toBe(200);
    await server.kill();
    try {
      const res = await a.app.inject({ method: 'GET', url: '/v2/dashboard', headers: auth });
      expect(res.statusCode, res.body).toBe(503);
      expect(res.json()).toMatchObject({ code: 'STORE_UNAVAILABLE', retriable: true });
      expect(res.headers['retry-after']).toBeDefined();
    } finally {
      await server.restart();
    }
    await until(
      async () => (await a.app.inject({ method: 'GET', url: '/v2/dashboard', headers: auth })).statusCode,
      (s) => s === 200,
      'the dashboard back',
    );
  });

  it('cluster gauges: only the leader (lowest live id) exports them, so sum() over both scrapes is the true value; the other leads once it leaves', async () => {
    const a = await replica('orchd-a', 'metrics:');
    const b = await replica('orchd-b', 'metrics:');
    const nodes = await Promise.all(
      ['n1', 'n2'].map((id) =>
        FixturePoolManager.start({
          nodeId: id,
          pools: [{ pool_id: `p-${id}`, models: ['m'], slots: 1 }],
          token: TOKEN,
          tokenIntervalMs: 1,
        }),
      ),
    );
    for (const n of nodes) cleanup.push(() => n.close());
    await nodes[0]!.startHeartbeats(a.url, HB);
    await nodes[1]!.startHeartbeats(b.url, HB);
    // both replicas know both nodes and each other
    for (const r of [a, b]) {
      await until(
        () => snapshotOf(r),
        (s) => s.nodes.filter((n) => n.state === 'online').length === 2 && s.replicas.length === 2,
        'both nodes and both replicas',
      );
    }
    const both = await Promise.all([scrape(a), scrape(b)]);
    expect(summed([both[0]!], 'llorch_cluster_leader')).toBe(1);
    expect(summed([both[1]!], 'llorch_cluster_leader')).toBe(0);
    expect(summed(both, 'llorch_nodes_online')).toBe(2);
    expect(summed(both, 'llorch_pools_available')).toBe(2);
    // the non-leader declares the families but has no samples
    expect(both[1]!.find((f) => f.name === 'llorch_nodes_online')?.samples).toEqual([]);
    // the queue depth counts the waiting tasks each replica admitted: every replica exports its own (the sum is the cluster's)
    expect(
      both.every((families) => families.some((f) => f.name === 'llorch_queue_depth' && f.samples.length === 2)),
    ).toBe(true);
    // per-replica counters stay per replica (summing them is right)
    expect(summed(both, 'llorch_node_registrations_total')).toBe(2);

    // the leader leaves: B leads after its next announcement, and the sums stay true
    await a.close();
    const afterLeave = await until(
      async () => [await scrape(b)],
      (s) => summed(s, 'llorch_cluster_leader') === 1,
      'B to lead',
    );
    for (const name of CLUSTER_GAUGES) expect(summed(afterLeave, name), name).toBe(2);
  });
});
