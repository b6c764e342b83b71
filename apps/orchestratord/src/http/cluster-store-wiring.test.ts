import { ErrorEnvelopeSchema, NodeListSchema, ReadinessSchema } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import {
  annAuth,
  bearer,
  nodeAuth,
  NODE,
  replicaHarness,
  until,
  CLUSTER_HEARTBEAT_MS,
} from '../testing/replica-harness.js';
import { sleep } from '../testing/store-harness.js';
import { frames, taskBody } from '../testing/test-helpers.js';

// Per-key rate limits, /readyz, the node registry and liveness, and slot leases through the cluster store.
describe('orchestratord replicas sharing a Redis store', () => {
  const h = replicaHarness();
  const replica = h.replica;
  const cleanup = { push: h.defer };

  it('node registry and liveness: registered on A, heard on B, placed on C; offline decided once; deregistered everywhere', async () => {
    const [a, b, c] = await Promise.all(
      [1, 2, 3].map(() => replica('nodes:', { heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS })),
    );
    const urls: string[] = [];
    for (const r of [a, b, c]) urls.push(await r!.app.listen({ port: 0, host: '127.0.0.1' }));
    const node = await FixturePoolManager.start({
      nodeId: 'n1',
      pools: [{ pool_id: 'p', models: ['m'], slots: 2 }],
      token: NODE,
      tokenIntervalMs: 1,
    });
    cleanup.push(() => node.close());
    const nodesOf = async (r: typeof a) =>
      NodeListSchema.parse((await r!.app.inject({ method: 'GET', url: '/v2/nodes', headers: annAuth })).json()).nodes;
    expect(await node.register(urls[0]!)).toBe(200);
    expect(await node.heartbeatOnce(urls[1]!)).toBe(200);
    // C was told nothing: it reads the store (one sync period, 50 ms here)
    await until(async () => (await nodesOf(c))[0]?.state === 'online', 'C to see n1 online');
    expect((await nodesOf(c))[0]).toMatchObject({
      node_id: 'n1',
      address: node.registration().address,
      pools: [{ pool_id: 'p', slots_total: 2 }],
    });
    const task = taskBody();
    expect(
      (await c!.app.inject({ method: 'POST', url: '/v2/tasks', headers: annAuth, payload: task })).statusCode,
    ).toBe(202);
    const events = await c!.app.inject({ method: 'GET', url: `/v2/tasks/${task.task_id}/events`, headers: annAuth });
    expect(frames(events.body).at(-1)?.event).toBe('end');
    expect(node.dispatches.map((d) => d.body.task_id)).toEqual([task.task_id]);

    // silent for 3 intervals: offline on every replica, logged (warn) by exactly one of them
    await until(
      async () => (await Promise.all([a, b, c].map(nodesOf))).every((n) => n[0]?.state === 'offline'),
      'n1 offline everywhere',
    );
    const offlineWarns = [a, b, c].flatMap((r) =>
      r!.logs.records().filter((l) => l.msg === 'node offline' && l.level === 40),
    );
    expect(offlineWarns).toHaveLength(1);
    expect(await node.heartbeatOnce(urls[2]!)).toBe(200);
    await until(async () => (await nodesOf(a))[0]?.state === 'online', 'A to see n1 online again');

    // a replica started now knows the node from its first request (buildApp waits for the first refresh)
    const late = await replica('nodes:', { heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS });
    expect((await nodesOf(late)).map((n) => n.node_id)).toEqual(['n1']);
    expect((await b!.app.inject({ method: 'DELETE', url: '/v2/nodes/n1', headers: nodeAuth })).statusCode).toBe(204);
    await until(async () => (await nodesOf(a)).length === 0 && (await nodesOf(c)).length === 0, 'n1 gone from A and C');
    expect(await node.heartbeatOnce(urls[0]!)).toBe(404);
    expect((await c!.app.inject({ method: 'DELETE', url: '/v2/nodes/n1', headers: nodeAuth })).statusCode).toBe(404);
  });

  it(
    'slot leases: 200 concurrent tasks over 3 replicas on one 2-slot pool; the node never refuses a dispatch as saturated',
    { timeout: 120_000 },
    async () => {
      const replicas = await Promise.all(
        [1, 2, 3].map(() => replica('leases:', { heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS })),
      );
      const urls: string[] = [];
      for (const r of replicas) urls.push(await r.app.listen({ port: 0, host: '127.0.0.1' }));
      const node = await FixturePoolManager.start({
        nodeId: 'n1',
        pools: [{ pool_id: 'p', models: ['m'], slots: 2 }],
        token: NODE,
        tokenIntervalMs: 1,
      });
      cleanup.push(() => node.close());
      expect(await node.register(urls[0]!)).toBe(200);
      await node.startHeartbeats(urls[1]!, CLUSTER_HEARTBEAT_MS);
      cleanup.push(() => Promise.resolve(node.stopHeartbeats()));
      await until(
        async () => replicas.every((r) => r.app.services.registry.poolsForModel('m')[0]?.node_state === 'online'),
        'every replica to see n1 online',
      );
      const tasks = Array.from({ length: 200 }, () => taskBody({ max_tokens: 4 }));
      const ends = await Promise.all(
        tasks.map(async (task, i) => {
          const { app } = replicas[i % 3]!;
          const admitted = await app.inject({ method: 'POST', url: '/v2/tasks', headers: annAuth, payload: task });
          expect(admitted.statusCode).toBe(202);
          const events = await app.inject({ method: 'GET', url: `/v2/tasks/${task.task_id}/events`, headers: annAuth });
          return frames(events.body).at(-1)?.event;
        }),
      );
      expect(ends.filter((e) => e !== 'end')).toEqual([]);
      expect(node.refusedSaturated).toEqual([]);
      expect(new Set(node.completed).size).toBe(200);
      for (const r of replicas)
        await until(async () => (await r.store.leases.list('n1/p')).length === 0, 'every lease released');
    },
  );

  it('a key limited to 3 a minute gets 3 across 3 replicas, not 9', async () => {
    const replicas = await Promise.all([replica('rl:'), replica('rl:'), replica('rl:')]);
    const codes: number[] = [];
    for (let i = 0; i < 9; i += 1)
      codes.push(
        (await replicas[i % 3]!.app.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer }))
          .statusCode,
      );
    expect(codes.filter((c) => c === 200)).toHaveLength(3);
    expect(codes.slice(3)).toEqual([429, 429, 429, 429, 429, 429]);
    const refused = await replicas[1]!.app.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer });
    expect(ErrorEnvelopeSchema.parse(refused.json())).toMatchObject({
      code: 'ADMISSION_REJECT',
      policy_label: 'rate_limit',
    });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(50);
    // another cluster (prefix) on the same Redis counts apart
    const other = await replica('other:');
    expect((await other.app.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer })).statusCode).toBe(
      200,
    );
  });

  it('/readyz turns not ready while Redis is unreachable and ready again once it is back; requests that need it answer 503 STORE_UNAVAILABLE at once meanwhile', async () => {
    const { app } = await replica('ready:');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const ready = async () => ReadinessSchema.parse((await app.inject({ method: 'GET', url: '/readyz' })).json());
    const until = async (want: 'ready' | 'not_ready') => {
      for (let i = 0; i < 60 && (await ready()).status !== want; i += 1) await sleep(100);
      return ready();
    };
    expect(await until('ready')).toEqual({ status: 'ready' });
    // a node the replica knows, so that requests reach admission
    const node = await FixturePoolManager.start({
      nodeId: 'n1',
      pools: [{ pool_id: 'p', models: ['m'], slots: 1 }],
      token: NODE,
    });
    cleanup.push(() => node.close());
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    expect(await node.register(url)).toBe(200);
    expect(await node.heartbeatOnce(url)).toBe(200);
    await h.server().kill();
    const down = await until('not_ready');
    expect(down.reason).toMatch(/^cluster store unreachable/);
    const r = await app.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer });
    expect(r.statusCode).toBe(503);
    expect(ErrorEnvelopeSchema.parse(r.json())).toMatchObject({ code: 'STORE_UNAVAILABLE', retriable: true });
    expect(r.headers['retry-after']).toBe('1');
    // admission answers at once, typed, never a hang: /v2 and /v1 in their shapes
    const started = Date.now();
    const admit = await app.inject({ method: 'POST', url: '/v2/tasks', headers: annAuth, payload: taskBody() });
    expect(admit.statusCode).toBe(503);
    expect(ErrorEnvelopeSchema.parse(admit.json())).toMatchObject({ code: 'STORE_UNAVAILABLE', retriable: true });
    expect(admit.headers['retry-after']).toBe('1');
    const chat = await app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: annAuth,
      payload: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(chat.statusCode).toBe(503);
    expect(chat.json()).toMatchObject({ error: { code: 'STORE_UNAVAILABLE' } });
    expect(Date.now() - started).toBeLessThan(1000);
    // the node routes write through the store: a node is told to retry, not that it is unknown
    const hb = await app.inject({
      method: 'POST',
      url: '/v2/nodes/n1/heartbeat',
      headers: nodeAuth,
      payload: { timestamp: new Date().toISOString(), pools: [] },
    });
    expect(hb.statusCode).toBe(503);
    expect(ErrorEnvelopeSchema.parse(hb.json())).toMatchObject({ code: 'STORE_UNAVAILABLE', retriable: true });
    await h.server().restart();
    expect(await until('ready')).toEqual({ status: 'ready' });
    expect((await app.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer })).statusCode).toBe(200);
  });
});
