// Real sockets: orchestratord listens on port 0, fixture pool-managerd nodes speak the dispatch
// contract over loopback HTTP, clients read SSE through undici.
import type { TaskRequestInput } from '@llama-orch/contracts';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { HB_MS, startFixtureCluster, type FixtureNodeSpec } from '../testing/openai-cluster.js';
import { STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import { openSse, storeOf, taskBody, TOKEN, waitFor, type SseClient, type TestApp } from '../testing/test-helpers.js';

interface Cluster {
  t: TestApp;
  url: string;
  nodes: FixturePoolManager[];
}

// Against both cluster stores: with Redis the node registry, liveness and slot leases go through it.
describe.each(STORE_KINDS)('SSE relay over real sockets with fixture nodes (%s store)', (kind) => {
  const stores = storeHarness(kind);
  let cluster: Cluster | undefined;
  const extraNodes: FixturePoolManager[] = [];

  afterEach(async () => {
    await cluster?.t.close();
    await Promise.all([...(cluster?.nodes ?? []), ...extraNodes.splice(0)].map((n) => n.close()));
    cluster = undefined;
  });

  async function start(nodes: FixtureNodeSpec[], over: Record<string, unknown> = {}): Promise<Cluster> {
    const { t, url, nodes: fixtures } = await startFixtureCluster(nodes, over, HB_MS, { deps: storeOf(kind, stores) });
    cluster = { t, url, nodes: fixtures };
    return cluster;
  }

  async function submit(
    c: Cluster,
    over: Partial<TaskRequestInput> = {},
  ): Promise<{ id: string; sse: string; body: Record<string, unknown> }> {
    const body = taskBody(over);
    const res = await request(`${c.url}/v2/tasks`, {
      method: 'POST',
      headers: { ...c.t.auth, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = (await res.body.json()) as Record<string, unknown>;
    expect(res.statusCode, JSON.stringify(json)).toBe(202);
    return { id: body.task_id as string, sse: (json.streams as { sse: string }).sse, body: json };
  }

  const events = (s: SseClient) => s.frames.map((f) => f.event);
  const tokens = (s: SseClient) => s.frames.filter((f) => f.event === 'token');

  it('relays started → metrics* → token* → end with ids and indices from 0, tokens as they arrive', async () => {
    const c = await start([
      {
        nodeId: 'n1',
        pools: [{ pool_id: 'p', models: ['m'], slots: 1, engine_version: 'b1-test' }],
        tokenIntervalMs: 40,
      },
    ]);
    const task = await submit(c, { max_tokens: 5, seed: 7, determinism: 'best_effort' });
    expect(task.sse).toBe(`${c.url}/v2/tasks/${task.id}/events`);
    const s = await openSse(task.sse, { ...c.t.auth, 'x-correlation-id': 'sse-corr-1' });
    expect(s.status).toBe(200);
    expect(s.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(s.headers['x-correlation-id']).toBe('sse-corr-1');
    await s.waitForFrame((f) => f.event === 'token');
    // The first token reached the client while the node was still generating.
    expect(c.nodes[0]?.completed).not.toContain(task.id);
    await s.done;
    const ev = events(s);
    expect(ev[0]).toBe('started');
    expect(ev.filter((e) => e === 'end')).toHaveLength(1);
    expect(ev.at(-1)).toBe('end');
    const firstToken = ev.indexOf('token');
    expect(ev.slice(firstToken, -1).every((e) => e === 'token')).toBe(true);
    expect(ev.slice(1, firstToken).every((e) => e === 'metrics')).toBe(true);
    expect(s.frames.map((f) => f.id)).toEqual(s.frames.map((_, i) => i));
    expect(tokens(s).map((f) => f.data)).toEqual([0, 1, 2, 3, 4].map((i) => ({ t: `tok${i} `, i })));
    const end = s.frames.at(-1)?.data;
    expect(end).toMatchObject({
      tokens_out: 5,
      pool_id: 'p',
      node_id: 'n1',
      engine_version: 'b1-test',
      stop_type: 'limit',
    });
    expect(end?.decode_ms).toBe(end?.decode_time_ms);
    // What the node received: the mapped DispatchRequest with the Bearer token.
    expect(c.nodes[0]?.dispatches[0]).toMatchObject({
      pool_id: 'p',
      authorization: `Bearer ${TOKEN}`,
      body: { task_id: task.id, prompt: 'hello', max_tokens: 5, seed: 7, greedy: false },
    });
    expect(c.nodes[0]?.dispatches[0]?.body.deadline_ms).toBeGreaterThan(0);
    expect(c.nodes[0]?.dispatches[0]?.body.deadline_ms).toBeLessThanOrEqual(60_000);

    // Counters moved by exactly what happened; the session counted the turn.
    const metrics = await (await request(`${c.url}/metrics`)).body.text();
    expect(metrics).toMatch(/llorch_tokens_out_total\{engine="llamacpp",engine_version="b1-test",pool_id="p"\} 5/);
    expect(metrics).toMatch(
      /llorch_tasks_started_total\{engine="llamacpp",engine_version="b1-test",pool_id="p",priority="interactive"\} 1/,
    );
    expect(metrics).toMatch(/llorch_task_first_token_seconds_count\{[^}]*\} 1/);
    const again = await (await request(`${c.url}/metrics`)).body.text();
    expect(again.match(/llorch_tokens_out_total\{[^}]*\} \d+/g)).toEqual(
      metrics.match(/llorch_tokens_out_total\{[^}]*\} \d+/g),
    );
    const session = await request(`${c.url}/v2/sessions/${(task.body as { task_id: string }).task_id}`, {
      headers: c.t.auth,
    });
    expect(session.statusCode).toBe(404); // task id is not a session id
    await session.body.dump();
    const log = c.t.logs.records();
    for (const msg of ['task admitted', 'task placed', 'stream started', 'task ended']) {
      const line = log.find((r) => r.msg === msg && r.task_id === task.id);
      expect(line, msg).toBeDefined();
      expect(typeof line?.human).toBe('string');
    }
    expect(c.t.logs.lines.some((l) => l.includes('tok0 '))).toBe(false);
  });

  it('strict determinism sends greedy sampling to a deterministic pool and sessions count tokens from end events', async () => {
    const c = await start([
      {
        nodeId: 'n1',
        pools: [
          { pool_id: 'a', models: ['m'], slots: 4 },
          { pool_id: 'det', models: ['m'], slots: 1, deterministic: true },
        ],
        tokenIntervalMs: 5,
      },
    ]);
    const session = taskBody().session_id as string;
    const task = await submit(c, { max_tokens: 3, seed: 42, determinism: 'strict', session_id: session });
    const s = await openSse(task.sse, c.t.auth);
    await s.done;
    expect(s.frames.at(-1)).toMatchObject({ event: 'end', data: { pool_id: 'det', tokens_out: 3 } });
    expect(c.nodes[0]?.dispatches[0]?.body).toMatchObject({ greedy: true, seed: 42 });
    const task2 = await submit(c, { max_tokens: 2, session_id: session });
    await (
      await openSse(task2.sse, c.t.auth)
    ).done;
    const info = await request(`${c.url}/v2/sessions/${session}`, { headers: c.t.auth });
    expect(await info.body.json()).toMatchObject({ session_id: session, turns: 2, tokens_out: 5, active_tasks: 0 });
  });

  it('sends keep-alive comments while nothing else is written', async () => {
    const c = await start([{ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1 }] }], {
      sse_keepalive_ms: 30,
    });
    (c.nodes[0] as FixturePoolManager).behaviour = { kind: 'hang' };
    const task = await submit(c);
    const s = await openSse(task.sse, c.t.auth);
    await waitFor(() => s.raw.includes(': keep-alive\n\n'), 5000, 'keep-alive comment');
    s.abort();
  });

  it('resumes after Last-Event-ID (header or query), live and after the end', async () => {
    const c = await start([{ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1 }], tokenIntervalMs: 40 }]);
    const task = await submit(c, { max_tokens: 6 });
    const a = await openSse(task.sse, c.t.auth);
    const third = await a.waitForFrame((f) => f.event === 'token' && f.data.i === 1);
    const b = await openSse(task.sse, { ...c.t.auth, 'last-event-id': String(third.id) });
    await Promise.all([a.done, b.done]);
    expect(b.frames[0]?.id).toBe(third.id + 1);
    expect(b.frames).toEqual(a.frames.slice(third.id + 1));
    const after = await openSse(`${task.sse}?last_event_id=2`, c.t.auth);
    await after.done;
    expect(after.frames).toEqual(a.frames.slice(3));
    // at or past the terminal frame: the terminal again (an empty stream would make an EventSource
    // reconnect for ever); past it (ids that ran ahead of the log), under the id after the client's
    const terminal = a.frames.at(-1)!;
    for (const last of [terminal.id, terminal.id + 40]) {
      const atEnd = await openSse(task.sse, { ...c.t.auth, 'last-event-id': String(last) });
      await atEnd.done;
      expect(atEnd.frames).toEqual([{ ...terminal, id: last > terminal.id ? last + 1 : terminal.id }]);
    }
  });

  it('client disconnect cancels: the node sees the abort, its slot is freed, the terminal is end {canceled}', async () => {
    const c = await start([{ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1 }], tokenIntervalMs: 50 }]);
    const node = c.nodes[0] as FixturePoolManager;
    const task = await submit(c, { max_tokens: 200 });
    const s = await openSse(task.sse, c.t.auth);
    await s.waitForFrame((f) => f.event === 'token' && f.data.i === 1);
    s.abort();
    await waitFor(() => node.aborts.includes(task.id), 5000, 'node-side abort');
    await waitFor(
      () => node.active('p') === 0 && c.t.app.services.registry.pools()[0]?.leased === 0,
      5000,
      'slot release',
    );
    const resumed = await openSse(task.sse, c.t.auth);
    await resumed.done;
    const end = resumed.frames.at(-1);
    expect(end).toMatchObject({
      event: 'end',
      data: { canceled: true, stop_type: 'cancel', pool_id: 'p', node_id: 'n1' },
    });
    const tokenFrames = resumed.frames.filter((f) => f.event === 'token');
    expect(end?.data.tokens_out).toBe(tokenFrames.length);
    expect(resumed.frames.filter((f) => f.id > (end?.id ?? 0))).toEqual([]);
    const metrics = await (await request(`${c.url}/metrics`)).body.text();
    expect(metrics).toMatch(/llorch_tasks_canceled_total\{engine="llamacpp",pool_id="p",reason="disconnect"\} 1/);
  });

  it('a node with an h2c dispatch URL: past the HTTP/1.1 share every dispatch rides one HTTP/2 connection; a cancel closes only its own stream', async () => {
    const c = await start(
      [{ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 8 }], tokenIntervalMs: 20, h2c: true }],
      { dispatch_http1_per_node: 2 },
    );
    const node = c.nodes[0] as FixturePoolManager;
    const tasks = await Promise.all(Array.from({ length: 6 }, () => submit(c, { max_tokens: 400 })));
    const streams = await Promise.all(tasks.map((t) => openSse(t.sse, c.t.auth)));
    await Promise.all(streams.map((s) => s.waitForFrame((f) => f.event === 'token' && f.data.i === 2)));
    expect(node.dispatches.map((d) => d.httpVersion).sort()).toEqual(['1.1', '1.1', '2.0', '2.0', '2.0', '2.0']);
    expect(node.h2cSessionsAccepted).toBe(1);
    expect(node.active('p')).toBe(6);
    const [first, ...rest] = tasks;
    const cancel = await request(`${c.url}/v2/tasks/${first?.id}/cancel`, { method: 'POST', headers: c.t.auth });
    expect(cancel.statusCode).toBe(204);
    await waitFor(() => node.aborts.includes(first?.id ?? ''), 5000, 'node-side abort of the cancelled stream');
    await waitFor(() => node.active('p') === 5, 5000, 'one slot freed');
    // The other streams keep flowing on the same connection.
    const counts = rest.map((_, i) => tokens(streams[i + 1] as SseClient).length);
    await Promise.all(
      rest.map((_, i) =>
        (streams[i + 1] as SseClient).waitForFrame(
          (f) => f.event === 'token' && (f.data.i as number) >= (counts[i] ?? 0) + 3,
        ),
      ),
    );
    expect(node.aborts).toEqual([first?.id]);
    expect(node.h2cSessionsAccepted).toBe(1);
    for (const s of streams) s.abort();
    // Every stream ended: the HTTP/1.1 share is free again, so the next two dispatches take it.
    await waitFor(() => node.active('p') === 0, 5000, 'all slots free');
    const again = await Promise.all([submit(c, { max_tokens: 2 }), submit(c, { max_tokens: 2 })]);
    await Promise.all(again.map(async (t) => (await openSse(t.sse, c.t.auth)).done));
    expect(node.dispatches.slice(6).map((d) => d.httpVersion)).toEqual(['1.1', '1.1']);
  });

  it('POST cancel aborts the upstream request; no token follows end {canceled}', async () => {
    const c = await start([{ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1 }], tokenIntervalMs: 20 }]);
    const node = c.nodes[0] as FixturePoolManager;
    const task = await submit(c, { max_tokens: 500 });
    const s = await openSse(task.sse, c.t.auth);
    await s.waitForFrame((f) => f.event === 'token' && f.data.i === 2);
    const res = await request(`${c.url}/v2/tasks/${task.id}/cancel`, { method: 'POST', headers: c.t.auth });
    expect(res.statusCode).toBe(204);
    await res.body.dump();
    await s.done;
    await waitFor(() => node.aborts.includes(task.id), 5000, 'node-side abort');
    const endIdx = s.frames.findIndex((f) => f.event === 'end');
    expect(endIdx).toBe(s.frames.length - 1);
    expect(s.frames[endIdx]?.data).toMatchObject({ canceled: true, tokens_out: tokens(s).length });
    // Give the node time to have sent more tokens; none may appear after the end.
    await new Promise((r) => setTimeout(r, 100));
    const resumed = await openSse(task.sse, c.t.auth);
    await resumed.done;
    expect(resumed.frames).toEqual(s.frames);
    expect(node.completed).not.toContain(task.id);
  });

  it.each([
    ['HTTP/1.1', false],
    ['h2c', true],
  ])(
    'a node that drops the connection before the first token (%s): the task is re-placed on another node',
    async (_proto, h2c) => {
      const c = await start(
        [
          { nodeId: 'n1', pools: [{ pool_id: 'pa', models: ['m'], slots: 1 }], h2c },
          { nodeId: 'n2', pools: [{ pool_id: 'pb', models: ['m'], slots: 1 }], h2c },
        ],
        { dispatch_http1_per_node: h2c ? 0 : 8 },
      );
      const [n1, n2] = c.nodes as [FixturePoolManager, FixturePoolManager];
      n1.nextBehaviours.push({ kind: 'crash-before-first-token' }, { kind: 'refuse' });
      for (const _ of [1, 2]) {
        const task = await submit(c, { max_tokens: 3 });
        const s = await openSse(task.sse, c.t.auth);
        await s.done;
        expect(events(s).includes('error')).toBe(false);
        expect(s.frames.at(-1)).toMatchObject({ event: 'end', data: { node_id: 'n2', pool_id: 'pb', tokens_out: 3 } });
        expect(tokens(s).map((f) => f.data.i)).toEqual([0, 1, 2]);
        // n1's pool is suspect until its next heartbeat; wait for it so the next task tries n1 first.
        await waitFor(
          () => c.t.app.services.registry.pools().find((p) => p.pool_id === 'pa')?.free === 1,
          5000,
          'n1 placeable again',
        );
      }
      expect(n1.dispatches).toHaveLength(2);
      expect(n2.dispatches).toHaveLength(2);
      const metrics = await (await request(`${c.url}/metrics`)).body.text();
      expect(metrics).toMatch(/llorch_tasks_replaced_total\{reason="WORKER_RESET"\} 2/);
    },
  );

  it.each([
    ['HTTP/1.1', false],
    ['h2c', true],
  ])(
    'a node that drops the connection after the first token (%s): error WORKER_RESET (retriable), no re-placement',
    async (_proto, h2c) => {
      const c = await start(
        [
          { nodeId: 'n1', pools: [{ pool_id: 'pa', models: ['m'], slots: 1 }], h2c },
          { nodeId: 'n2', pools: [{ pool_id: 'pb', models: ['m'], slots: 1 }], h2c },
        ],
        { dispatch_http1_per_node: h2c ? 0 : 8 },
      );
      const [n1, n2] = c.nodes as [FixturePoolManager, FixturePoolManager];
      n1.nextBehaviours.push({ kind: 'crash-after-tokens', tokens: 2 });
      const task = await submit(c, { max_tokens: 10 });
      const s = await openSse(task.sse, c.t.auth);
      await s.done;
      expect(events(s).slice(-3)).toEqual(['token', 'token', 'error']);
      expect(s.frames.at(-1)?.data).toMatchObject({ code: 'WORKER_RESET', retriable: true });
      expect(n2.dispatches).toHaveLength(0);
      expect(n1.dispatches).toHaveLength(1);
    },
  );

  it('gives up with WORKER_RESET when the re-placement fails before the first token too', async () => {
    const c = await start([
      { nodeId: 'n1', pools: [{ pool_id: 'pa', models: ['m'], slots: 1 }] },
      { nodeId: 'n2', pools: [{ pool_id: 'pb', models: ['m'], slots: 1 }] },
    ]);
    for (const n of c.nodes) n.behaviour = { kind: 'crash-before-first-token' };
    const task = await submit(c);
    const s = await openSse(task.sse, c.t.auth);
    await s.done;
    expect(events(s).filter((e) => e === 'token')).toEqual([]);
    expect(s.frames.at(-1)).toMatchObject({ event: 'error', data: { code: 'WORKER_RESET', retriable: true } });
    expect(c.nodes.map((n) => n.dispatches.length)).toEqual([1, 1]);
  });

  it('a node error event is relayed as the terminal error; 503 POOL_UNREADY or REPLICA_EXHAUSTED from a node re-queues the task', async () => {
    const c = await start([{ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1 }], tokenIntervalMs: 5 }]);
    const node = c.nodes[0] as FixturePoolManager;
    node.nextBehaviours.push({ kind: 'error-event', code: 'INVALID_PARAMS', retriable: false, afterTokens: 0 });
    const bad = await submit(c);
    const s1 = await openSse(bad.sse, c.t.auth);
    await s1.done;
    expect(s1.frames.at(-1)).toMatchObject({ event: 'error', data: { code: 'INVALID_PARAMS', retriable: false } });
    for (const kind of ['unready', 'exhausted'] as const) {
      node.nextBehaviours.push({ kind });
      const busy = await submit(c, { max_tokens: 2 });
      const s2 = await openSse(busy.sse, c.t.auth);
      await s2.done;
      expect(s2.frames.at(-1), kind).toMatchObject({ event: 'end', data: { tokens_out: 2 } });
      expect(
        node.dispatches.filter((d) => d.body.task_id === busy.id),
        kind,
      ).toHaveLength(2);
    }
  });

  it('N tasks on one slot: only one is dispatched until its slot is released', async () => {
    const c = await start([{ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1 }] }]);
    const node = c.nodes[0] as FixturePoolManager;
    node.behaviour = { kind: 'hang' };
    const tasks = await Promise.all(Array.from({ length: 4 }, () => submit(c)));
    await waitFor(() => node.dispatches.length >= 1, 5000, 'first dispatch');
    await new Promise((r) => setTimeout(r, 3 * HB_MS));
    expect(node.dispatches).toHaveLength(1);
    const first = node.dispatches[0]?.body.task_id as string;
    expect(first).toBe(tasks[0]?.id);
    await (await request(`${c.url}/v2/tasks/${first}/cancel`, { method: 'POST', headers: c.t.auth })).body.dump();
    await waitFor(() => node.dispatches.length === 2, 5000, 'second dispatch');
    expect(node.dispatches[1]?.body.task_id).toBe(tasks[1]?.id);
    await new Promise((r) => setTimeout(r, 3 * HB_MS));
    expect(node.dispatches).toHaveLength(2);
  });

  it('a node that stops heartbeating goes offline within 3 intervals; its queued tasks run on another node', async () => {
    const c = await start([{ nodeId: 'n1', pools: [{ pool_id: 'p1', models: ['m'], slots: 1 }] }]);
    const n1 = c.nodes[0] as FixturePoolManager;
    n1.behaviour = { kind: 'hang' };
    const running = await submit(c);
    await waitFor(() => n1.dispatches.length === 1, 5000, 'dispatch to n1');
    const queued = await submit(c, { max_tokens: 2 });
    const s = await openSse(queued.sse, c.t.auth);
    const registry = c.t.app.services.registry;
    n1.stopHeartbeats();
    const stoppedAt = Date.now();
    await waitFor(() => registry.nodeState('n1') === 'offline', 5000, 'n1 offline');
    const elapsed = Date.now() - stoppedAt;
    expect(elapsed).toBeGreaterThanOrEqual(2 * HB_MS); // not before the heartbeats were really missed
    // Free n1's slot: it is offline, so the queued task must not go there.
    await (await request(`${c.url}/v2/tasks/${running.id}/cancel`, { method: 'POST', headers: c.t.auth })).body.dump();
    await new Promise((r) => setTimeout(r, 3 * HB_MS));
    expect(n1.dispatches).toHaveLength(1);
    const n2 = await FixturePoolManager.start({
      nodeId: 'n2',
      pools: [{ pool_id: 'p2', models: ['m'], slots: 1 }],
      token: TOKEN,
    });
    extraNodes.push(n2);
    await n2.startHeartbeats(c.url, HB_MS);
    await s.done;
    expect(s.frames.at(-1)).toMatchObject({ event: 'end', data: { node_id: 'n2', tokens_out: 2 } });
    // A heartbeat brings n1 back online.
    expect(await n1.heartbeatOnce(c.url)).toBe(200);
    expect(registry.nodeState('n1')).toBe('online');
  });

  it('a node that dies with a task in flight: the task is re-placed once another node is available', async () => {
    const c = await start([{ nodeId: 'n1', pools: [{ pool_id: 'p1', models: ['m'], slots: 1 }] }]);
    const n1 = c.nodes[0] as FixturePoolManager;
    n1.behaviour = { kind: 'hang' };
    const task = await submit(c, { max_tokens: 2 });
    const s = await openSse(task.sse, c.t.auth);
    await waitFor(() => n1.dispatches.length === 1, 5000, 'dispatch to n1');
    await n1.close(); // stops heartbeats and drops every connection
    await waitFor(() => c.t.app.services.registry.nodeState('n1') === 'offline', 5000, 'n1 offline');
    expect(n1.dispatches).toHaveLength(1);
    const n2 = await FixturePoolManager.start({
      nodeId: 'n2',
      pools: [{ pool_id: 'p2', models: ['m'], slots: 1 }],
      token: TOKEN,
    });
    extraNodes.push(n2);
    await n2.startHeartbeats(c.url, HB_MS);
    await s.done;
    expect(events(s).includes('error')).toBe(false);
    expect(s.frames.at(-1)).toMatchObject({ event: 'end', data: { node_id: 'n2', tokens_out: 2 } });
  });

  it('a frozen node (sockets open, no heartbeats): its dispatched task is re-placed once the node is offline', async () => {
    const c = await start([
      { nodeId: 'n1', pools: [{ pool_id: 'p1', models: ['m'], slots: 1 }] },
      { nodeId: 'n2', pools: [{ pool_id: 'p2', models: ['m'], slots: 1 }] },
    ]);
    const n1 = c.nodes[0] as FixturePoolManager;
    n1.behaviour = { kind: 'hang' };
    const task = await submit(c, {
      max_tokens: 2,
      placement: { mode: 'prefer', prefer_pools: ['p1'], allow_fallback: true },
    });
    const s = await openSse(task.sse, c.t.auth);
    await waitFor(() => n1.dispatches.length === 1, 5000, 'dispatch to n1');
    n1.stopHeartbeats();
    // nobody cancels: the dispatcher itself must give up on the frozen node
    await s.done;
    expect(events(s).includes('error')).toBe(false);
    expect(s.frames.at(-1)).toMatchObject({ event: 'end', data: { node_id: 'n2', tokens_out: 2 } });
    await waitFor(() => n1.aborts.includes(task.id), 5000, 'n1 sees the abort');
  });

  it('a node that does not accept a dispatch in time (frozen, heartbeats still arriving): the task is re-placed at once', async () => {
    const c = await start(
      [
        { nodeId: 'n1', pools: [{ pool_id: 'p1', models: ['m'], slots: 1 }] },
        { nodeId: 'n2', pools: [{ pool_id: 'p2', models: ['m'], slots: 1 }] },
      ],
      { dispatch_accept_timeout_ms: 300 },
    );
    const n1 = c.nodes[0] as FixturePoolManager;
    n1.behaviour = { kind: 'freeze' };
    const task = await submit(c, {
      max_tokens: 2,
      placement: { mode: 'prefer', prefer_pools: ['p1'], allow_fallback: true },
    });
    const s = await openSse(task.sse, c.t.auth);
    await s.done;
    expect(events(s).includes('error')).toBe(false);
    expect(s.frames.at(-1)).toMatchObject({ event: 'end', data: { node_id: 'n2', tokens_out: 2 } });
    // n1 never stopped heartbeating: the accept timeout moved the task, not an offline mark.
    expect(c.t.app.services.registry.nodeState('n1')).toBe('online');
    expect(n1.dispatches.map((d) => d.body.task_id)).toEqual([task.id]);
    await waitFor(() => n1.aborts.includes(task.id), 5000, 'n1 sees the abandoned request close');
  });

  it('a running task past its deadline ends with DECODE_TIMEOUT and the node sees the abort', async () => {
    const c = await start([{ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1 }] }]);
    const node = c.nodes[0] as FixturePoolManager;
    node.behaviour = { kind: 'hang' };
    const task = await submit(c, { deadline_ms: 300 });
    const s = await openSse(task.sse, c.t.auth);
    await s.done;
    expect(s.frames.at(-1)).toMatchObject({ event: 'error', data: { code: 'DECODE_TIMEOUT' } });
    await waitFor(() => node.aborts.includes(task.id), 5000, 'node-side abort');
  });

  it('close(): streaming clients get one error frame and the node sees the abort', async () => {
    const c = await start([{ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1 }], tokenIntervalMs: 30 }]);
    const node = c.nodes[0] as FixturePoolManager;
    const task = await submit(c, { max_tokens: 1000 });
    const s = await openSse(task.sse, c.t.auth);
    await s.waitForFrame((f) => f.event === 'token');
    await c.t.close();
    await s.done;
    expect(s.frames.at(-1)).toMatchObject({ event: 'error', data: { code: 'INTERNAL', retriable: true } });
    expect(s.frames.filter((f) => f.event === 'error' || f.event === 'end')).toHaveLength(1);
    await waitFor(() => node.aborts.includes(task.id), 5000, 'node-side abort');
  });
});
