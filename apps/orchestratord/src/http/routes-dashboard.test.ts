import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ClusterPoolListSchema,
  DashboardSnapshotSchema,
  ErrorEnvelopeSchema,
  type DashboardSnapshot,
} from '@llama-orch/contracts';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import type { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { startFixtureCluster } from '../testing/openai-cluster.js';
import { makeApp, TOKEN, waitFor, type TestApp } from '../testing/test-helpers.js';

const auth = { authorization: `Bearer ${TOKEN}` };

/** `GET /v2/dashboard/events` over a real socket: every `snapshot` event parsed and checked against the contract. */
async function openEvents(url: string, headers: Record<string, string> = auth) {
  const controller = new AbortController();
  const res = await request(`${url}/v2/dashboard/events`, { headers, signal: controller.signal });
  const snapshots: DashboardSnapshot[] = [];
  const state = { raw: '', ended: false };
  let buffered = '';
  const done = (async () => {
    try {
      for await (const chunk of res.body) {
        const text = (chunk as Buffer).toString('utf8');
        state.raw += text;
        buffered += text;
        for (let i = buffered.indexOf('\n\n'); i >= 0; i = buffered.indexOf('\n\n')) {
          const block = buffered.slice(0, i);
          buffered = buffered.slice(i + 2);
          if (!block.startsWith('event: snapshot\n')) continue;
          snapshots.push(DashboardSnapshotSchema.parse(JSON.parse(block.slice('event: snapshot\ndata: '.length))));
        }
      }
    } catch {
      // aborted by the test
    } finally {
      state.ended = true;
    }
  })();
  return {
    status: res.statusCode,
    headers: res.headers,
    snapshots,
    state,
    done,
    abort: () => controller.abort(),
    next: async (pred: (s: DashboardSnapshot) => boolean, timeoutMs = 5000, what = 'a matching snapshot') => {
      await waitFor(() => snapshots.some(pred) || state.ended, timeoutMs, what);
      const found = snapshots.find(pred);
      if (found === undefined) throw new Error(`stream ended without ${what}`);
      return found;
    },
  };
}

/** Runs one task to its end through `POST /v2/tasks` with `Accept: text/event-stream`. */
async function runTask(url: string, correlationId: string): Promise<string> {
  const res = await request(`${url}/v2/tasks`, {
    method: 'POST',
    headers: {
      ...auth,
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'x-correlation-id': correlationId,
    },
    body: JSON.stringify({ model_ref: 'synthetic', prompt: 'hello there', max_tokens: 3 }),
  });
  expect(res.statusCode).toBe(200);
  return res.body.text();
}

const POOL = { pool_id: 'p', models: ['synthetic:llama'], aliases: ['synthetic'], slots: 2 };

describe('dashboard routes', () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const cluster = async (hbMs?: number, bucketMs = 3_600_000) => {
    const c = await startFixtureCluster([{ nodeId: 'n1', pools: [POOL], tokenIntervalMs: 5 }], {}, hbMs, {
      tuning: { dashboardBucketMs: bucketMs },
    });
    cleanups.push(
      () => Promise.all(c.nodes.map((f) => f.close())),
      () => c.t.close(),
    );
    return c as { t: TestApp; url: string; nodes: [FixturePoolManager] };
  };

  it('GET /v2/dashboard: the live cluster as the contract shapes it, ended tasks with their correlation id; 401 without the key', async () => {
    const { t, url } = await cluster(undefined, 200);
    const first = await request(`${url}/v2/dashboard`, { headers: auth });
    expect(first.statusCode).toBe(200);
    const snap = DashboardSnapshotSchema.parse(await first.body.json());
    expect(snap.nodes).toMatchObject([{ node_id: 'n1', state: 'online', version: 'fixture' }]);
    expect(snap.pools).toMatchObject([
      {
        pool_id: 'p',
        node_id: 'n1',
        state: 'ready',
        models: ['synthetic:llama'],
        aliases: ['synthetic'],
        slots_total: 2,
        slots_free: 2,
      },
    ]);
    expect(snap.queue).toMatchObject({
      depth: { interactive: 0, batch: 0 },
      capacity: t.config.admission_capacity,
      running: 0,
    });
    expect(snap.recent_tasks).toEqual([]);
    // GET /v2/pools shows the same pools (one place builds them), aliases included.
    const pools = ClusterPoolListSchema.parse(await (await request(`${url}/v2/pools`, { headers: auth })).body.json());
    expect(pools.pools).toEqual(snap.pools);

    const text = await runTask(url, 'dash-corr-1');
    expect(text).toContain('event: end');
    let after: DashboardSnapshot | undefined;
    const endedIn = (x: DashboardSnapshot | undefined) => x?.throughput.reduce((n, p) => n + p.tasks_ended, 0) ?? 0;
    // Buckets are 200 ms wide here; only closed ones are listed: wait for the one the task ended in.
    for (let i = 0; i < 100 && endedIn(after) === 0; i += 1) {
      await new Promise((r) => setTimeout(r, 50));
      after = DashboardSnapshotSchema.parse(
        await (await request(`${url}/v2/dashboard`, { headers: auth })).body.json(),
      );
    }
    expect(after?.recent_tasks).toMatchObject([
      {
        correlation_id: 'dash-corr-1',
        model: 'synthetic',
        priority: 'interactive',
        node_id: 'n1',
        pool_id: 'p',
        tokens_out: 3,
        outcome: 'ok',
      },
    ]);
    expect(after?.recent_tasks[0]?.ttft_ms).toBeTypeOf('number');
    expect(endedIn(after)).toBe(1);
    // Every token was relayed before the end, so the closed buckets hold all 3.
    expect(after?.throughput.reduce((n, p) => n + (p.tokens_per_s * (after?.bucket_ms ?? 0)) / 1000, 0)).toBeCloseTo(
      3,
      6,
    );
    expect(after?.throughput.filter((p) => p.ttft_p50_ms !== undefined)).toHaveLength(1);

    for (const path of ['/v2/dashboard', '/v2/dashboard/events']) {
      for (const headers of [{}, { authorization: 'Bearer wrong-token-0123456789' }]) {
        const res = await request(`${url}${path}`, { headers });
        expect(res.statusCode, path).toBe(401);
        expect(ErrorEnvelopeSchema.parse(await res.body.json())).toMatchObject({ code: 'UNAUTHORIZED' });
      }
    }
  });

  it('the queue and running tasks now, and how tasks ended: ok, error with its code, canceled', async () => {
    const {
      url,
      nodes: [node],
    } = await cluster();
    const snap = async () =>
      DashboardSnapshotSchema.parse(await (await request(`${url}/v2/dashboard`, { headers: auth })).body.json());
    const admit = async (correlationId: string): Promise<string> => {
      const res = await request(`${url}/v2/tasks`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', 'x-correlation-id': correlationId },
        body: JSON.stringify({ model_ref: 'synthetic:llama', prompt: 'hi', max_tokens: 3 }),
      });
      expect(res.statusCode).toBe(202);
      return ((await res.body.json()) as { task_id: string }).task_id;
    };
    node.nextBehaviours.push({ kind: 'error-event', code: 'WORKER_RESET', retriable: false, afterTokens: 1 });
    const failed = await runTask(url, 'dash-failed');
    expect(failed).toContain('event: error');
    // Both slots held by hanging dispatches, a third task waits in the queue.
    node.behaviour = { kind: 'hang' };
    const held = [await admit('dash-held-1'), await admit('dash-held-2')];
    await waitFor(() => node.active('p') === 2, 5000, 'both slots busy');
    const queued = await admit('dash-queued');
    const busy = await snap();
    expect(busy.queue).toMatchObject({ depth: { interactive: 1, batch: 0 }, running: 2 });
    expect(busy.queue.predicted_wait_ms).toBeGreaterThanOrEqual(0);
    expect(busy.pools[0]).toMatchObject({ slots_free: 0, leased: 2 });
    for (const id of [queued, ...held]) {
      const res = await request(`${url}/v2/tasks/${id}/cancel`, { method: 'POST', headers: auth });
      expect(res.statusCode).toBe(204);
      await res.body.dump();
    }
    const after = await snap();
    expect(after.queue).toMatchObject({ depth: { interactive: 0, batch: 0 }, running: 0 });
    expect(after.recent_tasks.map((r) => [r.correlation_id, r.outcome, r.code ?? null, r.tokens_out])).toEqual([
      ['dash-held-2', 'canceled', null, 0],
      ['dash-held-1', 'canceled', null, 0],
      ['dash-queued', 'canceled', null, 0],
      ['dash-failed', 'error', 'WORKER_RESET', 1],
    ]);
    // The queued one never reached a pool; the others ran on p.
    expect(after.recent_tasks.find((r) => r.correlation_id === 'dash-queued')?.pool_id).toBeUndefined();
    expect(after.recent_tasks.find((r) => r.correlation_id === 'dash-held-1')).toMatchObject({
      pool_id: 'p',
      node_id: 'n1',
    });
    expect(after.recent_tasks.find((r) => r.correlation_id === 'dash-failed')?.ttft_ms).toBeTypeOf('number');
  });

  it('GET /v2/dashboard/events pushes a snapshot on connect and another when a heartbeat marks the pool draining (no polling)', async () => {
    const {
      url,
      nodes: [node],
    } = await cluster();
    const events = await openEvents(url, { ...auth, 'x-correlation-id': 'dash-events-1' });
    cleanups.push(async () => {
      events.abort();
      await events.done;
    });
    expect(events.status).toBe(200);
    expect(events.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(events.headers['cache-control']).toBe('no-cache, no-transform');
    expect(events.headers['x-correlation-id']).toBe('dash-events-1');
    const first = await events.next(() => true, 5000, 'the snapshot sent on connect');
    expect(first.pools).toMatchObject([{ pool_id: 'p', state: 'ready', draining: false }]);
    // The node's own state changes; only its heartbeat tells orchestratord. Buckets are an hour
    // wide here, so no bucket-end push can stand in for the registry's event.
    node.setPoolState('p', 'draining');
    const drained = await events.next(
      (s) => s.pools[0]?.state === 'draining',
      5000,
      'a snapshot with the pool draining',
    );
    expect(drained.pools[0]).toMatchObject({ draining: true, ready: false });
    expect(drained.generated_at_ms).toBeGreaterThanOrEqual(first.generated_at_ms);
    // A task that runs shows up too.
    node.setPoolState('p', 'ready');
    await events.next(
      (s) => s.pools[0]?.state === 'ready' && events.snapshots.indexOf(s) > events.snapshots.indexOf(drained),
      5000,
      'the pool ready again',
    );
    await runTask(url, 'dash-corr-2');
    await events.next(
      (s) => s.recent_tasks.some((t) => t.correlation_id === 'dash-corr-2'),
      5000,
      'a snapshot with the ended task',
    );
  });

  it("a drain forwarded through the API is pushed at once, before the node's next heartbeat", async () => {
    const { url } = await cluster(5000); // the next heartbeat is seconds away
    const events = await openEvents(url);
    cleanups.push(async () => {
      events.abort();
      await events.done;
    });
    await events.next(() => true);
    const drain = await request(`${url}/v2/pools/p/drain`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ deadline_ms: 1000 }),
    });
    expect(drain.statusCode).toBe(202);
    await drain.body.dump();
    const s = await events.next((x) => x.pools[0]?.draining === true, 2500, 'a snapshot with the pool marked draining');
    expect(s.nodes[0]?.state).toBe('online');
  });

  it('a client that leaves is forgotten; app close ends open streams and finishes (no hang on a dashboard left open)', async () => {
    const { t, url } = await cluster();
    const leaving = await openEvents(url);
    await leaving.next(() => true);
    leaving.abort();
    await leaving.done;
    await waitFor(
      () => t.logs.records().some((r) => r.msg === 'dashboard stream ended' && r.open === 0),
      5000,
      'the server to see the client leave',
    );

    const a = await openEvents(url);
    const b = await openEvents(url);
    await a.next(() => true);
    await b.next(() => true);
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      t.close().then(() => 'closed'),
      new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve('still closing after 10 s'), 10_000);
      }),
    ]);
    clearTimeout(timer);
    expect(outcome).toBe('closed');
    await Promise.all([a.done, b.done]);
    expect(a.state.ended && b.state.ended).toBe(true);
  });
});

describe('the dashboard page', () => {
  let t: TestApp | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('/ answers the built index.html and /dashboard/* its files, without a key; hashed assets are cached for good', async () => {
    dir = await mkdtemp(join(tmpdir(), 'orchd-dashboard-'));
    await mkdir(join(dir, 'assets'));
    await writeFile(
      join(dir, 'index.html'),
      '<!doctype html><title>llama-orch</title><script type="module" src="/dashboard/assets/index-abc123.js"></script>',
    );
    await writeFile(join(dir, 'assets', 'index-abc123.js'), 'console.log("page")');
    await writeFile(join(dir, 'favicon.svg'), '<svg/>');
    t = await makeApp({}, {}, undefined, undefined, { dashboardDir: dir });

    const root = await t.app.inject({ method: 'GET', url: '/' });
    expect(root.statusCode).toBe(200);
    expect(root.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(root.headers['cache-control']).toBe('no-cache');
    expect(root.body).toContain('/dashboard/assets/index-abc123.js');
    const asset = await t.app.inject({ method: 'GET', url: '/dashboard/assets/index-abc123.js' });
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['content-type']).toMatch(/javascript/);
    expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const icon = await t.app.inject({ method: 'GET', url: '/dashboard/favicon.svg' });
    expect(icon.statusCode).toBe(200);
    expect(icon.headers['cache-control']).toBe('no-cache');
    const index = await t.app.inject({ method: 'GET', url: '/dashboard/' });
    expect(index.statusCode).toBe(200);
    expect(index.body).toContain('<title>llama-orch</title>');
    const bare = await t.app.inject({ method: 'GET', url: '/dashboard' });
    expect(bare.statusCode).toBe(302);
    expect(bare.headers.location).toBe('/');
    expect((await t.app.inject({ method: 'GET', url: '/dashboard/assets/missing.js' })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'GET', url: '/dashboard/../package.json' })).statusCode).not.toBe(200);
    // The API next to it still needs the key.
    expect((await t.app.inject({ method: 'GET', url: '/v2/dashboard' })).statusCode).toBe(401);
  });

  it('an unbuilt page: / answers an error envelope that says to run pnpm build (the server runs on)', async () => {
    dir = await mkdtemp(join(tmpdir(), 'orchd-dashboard-'));
    t = await makeApp({}, {}, undefined, undefined, { dashboardDir: join(dir, 'not-built') });
    const res = await t.app.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(500);
    expect(ErrorEnvelopeSchema.parse(res.json())).toMatchObject({
      code: 'INTERNAL',
      retriable: false,
      message: expect.stringMatching(/not built.*pnpm build/),
    });
    expect((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });
});
