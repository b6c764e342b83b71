import { readFileSync, statSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { Agent, H2CClient, request, type Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DispatchEvent } from '@llama-orch/contracts';
import { buildDispatchApp } from '../app.js';
import { ndjsonEvents, poolStatus, startHarness, until, waitReady, type Harness } from '../testing/harness.js';

// Re-attachable dispatches (`reattach_ms`) through an in-process pool-managerd to one real
// llama-server pool (synthetic model, 1 slot, 4096-token context so a long generation stays in
// flight for seconds), over HTTP/1.1 and the h2c dispatch listener. Whether the engine ran one
// generation or cancelled it is read from the engine's own log (the file its `engine spawned` line
// names): each task it runs is released once with `stop processing: n_tokens = N`, a cancelled one
// logs `cancel task` first.
let h: Harness;
let h2c: Awaited<ReturnType<typeof buildDispatchApp>>;
let h2cOrigin: string;
let h2cAgent: Agent;
let logPath: string;

beforeAll(async () => {
  h = await startHarness({
    pools: [{ id: 'ra', model: 'synthetic:llama?ctx=4096', ctx: 4096, slots: 1, threads: 1 }],
    supervision: { stopTimeoutMs: 3000 },
  });
  await waitReady(h, 'ra');
  h2c = await buildDispatchApp(
    { manager: h.manager, logger: h.logger, apiToken: h.token },
    { node: { id: 'test-node', addr: '127.0.0.1:0' } },
  );
  await h2c.listen({ host: '127.0.0.1', port: 0 });
  const a = h2c.server.address();
  h2cOrigin = `http://127.0.0.1:${typeof a === 'object' && a !== null ? a.port : 0}`;
  h2cAgent = new Agent({ factory: (origin, opts) => new H2CClient(origin, opts) });
  logPath = h.logs.find((l) => l.msg === 'engine spawned' && l.pool_id === 'ra')?.log as string;
}, 45 * 60_000);

afterAll(async () => {
  await h2cAgent?.close();
  await h2c?.close();
  await h?.close();
});

const auth = (): Record<string, string> => ({ authorization: `Bearer ${h.token}` });

/** A long greedy generation that runs to `max_tokens` unless cancelled (logit_bias bans the end-of-text token, id 2). */
function longRun(taskId: string, maxTokens: number, reattachMs: number): Record<string, unknown> {
  return {
    task_id: taskId,
    workload: 'completion',
    prompt: 'Tell a long story',
    max_tokens: maxTokens,
    greedy: true,
    sampling: { logit_bias: { 2: -100 } },
    reattach_ms: reattachMs,
  };
}

interface Stream {
  status: number;
  events: AsyncGenerator<DispatchEvent>;
  body: Dispatcher.ResponseData['body'];
  json?: unknown;
}

async function open(
  path: string,
  method: 'POST' | 'GET',
  body?: Record<string, unknown>,
  origin: 'h1' | 'h2c' = 'h1',
): Promise<Stream> {
  const headers = { ...auth(), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) };
  const payload = body !== undefined ? JSON.stringify(body) : null;
  const res =
    origin === 'h1'
      ? await request(`${h.url}${path}`, { method, headers, body: payload, reset: true })
      : await h2cAgent.request({ origin: h2cOrigin, path, method, headers, body: payload });
  if (res.statusCode !== 200)
    return { status: res.statusCode, json: await res.body.json(), events: (async function* () {})(), body: res.body };
  return { status: 200, events: ndjsonEvents(res.body), body: res.body };
}

const post = (body: Record<string, unknown>, origin: 'h1' | 'h2c' = 'h1'): Promise<Stream> =>
  open('/v2/pools/ra/completions', 'POST', body, origin);
const reattach = (taskId: string, after?: number, origin: 'h1' | 'h2c' = 'h1'): Promise<Stream> =>
  open(`/v2/pools/ra/dispatches/${taskId}${after === undefined ? '' : `?after=${after}`}`, 'GET', undefined, origin);

async function cancel(taskId: string, pool = 'ra'): Promise<{ status: number; json: unknown }> {
  const res = await request(`${h.url}/v2/pools/${pool}/dispatches/${taskId}`, { method: 'DELETE', headers: auth() });
  const text = await res.body.text();
  return { status: res.statusCode, json: text === '' ? undefined : JSON.parse(text) };
}

/** Reads `n` events, then leaves the stream open (the generator is not finished). */
async function take(events: AsyncGenerator<DispatchEvent>, n: number): Promise<DispatchEvent[]> {
  const out: DispatchEvent[] = [];
  while (out.length < n) {
    const next = await events.next();
    if (next.done === true) break;
    out.push(next.value);
  }
  return out;
}

async function rest(events: AsyncGenerator<DispatchEvent>): Promise<DispatchEvent[]> {
  const out: DispatchEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

const indexes = (evs: DispatchEvent[]): number[] => evs.flatMap((e) => (e.type === 'token' ? [e.i] : []));
const lastIndex = (evs: DispatchEvent[]): number => indexes(evs).at(-1) as number;
const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, k) => from + k);

function engineLogFrom(offset: number): string {
  return readFileSync(logPath, 'utf8').slice(offset);
}

/** The engine finished its tasks since `offset` (each task's slot release is logged once). */
async function engineReleases(offset: number, n: number): Promise<string> {
  return until(
    () => {
      const text = engineLogFrom(offset);
      return (text.match(/stop processing: n_tokens = /g) ?? []).length >= n ? text : undefined;
    },
    `${n} slot release(s) in the engine log`,
    60_000,
    50,
  );
}

/** pool-managerd saw the connection of `taskId` close (the window started). */
async function detached(taskId: string): Promise<void> {
  await until(
    () => h.logs.some((l) => l.task_id === taskId && l.msg === 'dispatch detached: waiting for a re-attach'),
    'dispatch detached',
    10_000,
    5,
  );
}

async function slotFree(): Promise<void> {
  await until(async () => (await poolStatus(h, 'ra')).slots_free === 1, 'lease released', 10_000, 20);
}

function metric(text: string, outcome: string): number {
  return Number(new RegExp(`llorch_dispatch_reattach_total\\{outcome="${outcome}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
}

describe('re-attachable dispatches on the real llama-server', () => {
  it('a client that drops mid-stream re-attaches after the last index it read: every index once, in order, one end, one generation on the engine', async () => {
    const offset = statSync(logPath).size;
    const taskId = randomUUID();
    const first = await post(longRun(taskId, 2000, 10_000));
    expect(first.status).toBe(200);
    const head = await take(first.events, 5);
    expect(head.every((e) => e.type === 'token')).toBe(true);
    first.body.destroy();
    await detached(taskId);
    const second = await reattach(taskId, lastIndex(head));
    expect(second.status).toBe(200);
    const tail = await rest(second.events);
    const all = [...head, ...tail];
    expect(indexes(all)).toEqual(range(0, 2000));
    expect(all.filter((e) => e.type === 'end' || e.type === 'error')).toHaveLength(1);
    expect(all.at(-1)).toMatchObject({ type: 'end', tokens_out: 2000, stop_type: 'limit', pool_id: 'ra' });
    const engine = await engineReleases(offset, 1);
    expect(engine).not.toMatch(/cancel task/);
    expect(engine.match(/stop processing: n_tokens = /g)).toHaveLength(1);
    await slotFree();
    // Delivered on a connection that finished normally: forgotten.
    await until(() => h.manager.held.size === 0, 'held dispatch forgotten', 5000);
    expect((await reattach(taskId)).status).toBe(404);
    expect(h.logs.filter((l) => l.task_id === taskId && l.msg === 'dispatch ended')).toMatchObject([
      { outcome: 'end', tokens_out: 2000 },
    ]);
  });

  it('a re-attach with an index lower than what was written replays from right after it', async () => {
    const taskId = randomUUID();
    const first = await post(longRun(taskId, 300, 10_000));
    const head = await take(first.events, 12);
    first.body.destroy();
    await detached(taskId);
    const again = await reattach(taskId, 3);
    const tail = await rest(again.events);
    expect(indexes(tail)).toEqual(range(4, 300));
    expect(tail.at(-1)).toMatchObject({ type: 'end', tokens_out: 300 });
    expect(head.slice(4).map((e) => (e.type === 'token' ? e.t : ''))).toEqual(
      tail.slice(0, 8).map((e) => (e.type === 'token' ? e.t : '')),
    );
    await slotFree();
  });

  it('not re-attached within reattach_ms: the engine request is cancelled (engine log), the slot frees, then GET is 404', async () => {
    const offset = statSync(logPath).size;
    const taskId = randomUUID();
    const first = await post(longRun(taskId, 3800, 300));
    await take(first.events, 2);
    const t0 = performance.now();
    first.body.destroy();
    await until(
      () =>
        h.logs.find((l) => l.task_id === taskId && l.msg === 'no orchestrator re-attached within 300 ms; cancelled'),
      'window passed',
      10_000,
    );
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThanOrEqual(290);
    const engine = await engineReleases(offset, 1);
    expect(engine, 'the engine cancelled the task').toMatch(/cancel task/);
    expect(Number(/stop processing: n_tokens = (\d+)/.exec(engine)?.[1])).toBeLessThan(3800);
    await slotFree();
    const gone = await reattach(taskId);
    expect(gone).toMatchObject({ status: 404, json: { code: 'NOT_FOUND' } });
    expect(
      h.logs.filter((l) => l.task_id === taskId && (l.msg as string).startsWith('no orchestrator re-attached')),
    ).toHaveLength(1);
    expect(h.logs.find((l) => l.task_id === taskId && l.msg === 'dispatch ended')).toMatchObject({
      outcome: 'canceled',
    });
    const metrics = await (await request(`${h.url}/metrics`)).body.text();
    expect(metric(metrics, 'expired')).toBeGreaterThanOrEqual(1);
  });

  it('ended while detached: a re-attach gets every event and the end, and again for half the window (its end may not have arrived); DELETE, then GET is 404', async () => {
    const taskId = randomUUID();
    const first = await post(longRun(taskId, 60, 20_000));
    await take(first.events, 1);
    first.body.destroy();
    await until(
      () => h.logs.find((l) => l.task_id === taskId && l.msg === 'dispatch ended'),
      'dispatch ended while detached',
      30_000,
    );
    expect(h.manager.held.find('ra', taskId)).toBeDefined();
    // No HEAD twin of the re-attach route (it would take the dispatch over and deliver nothing).
    const head = await request(`${h.url}/v2/pools/ra/dispatches/${taskId}`, { method: 'HEAD', headers: auth() });
    await head.body.dump();
    expect(head.statusCode).toBe(404);
    expect((await reattach(taskId, -2)).status).toBe(400);
    const again = await reattach(taskId);
    const all = await rest(again.events);
    expect(indexes(all)).toEqual(range(0, 60));
    expect(all.at(-1)).toMatchObject({ type: 'end', tokens_out: 60 });
    // written out is not delivered: an orchestrator killed as the end went out is taken over later
    const twice = await reattach(taskId, 10);
    const after10 = await rest(twice.events);
    expect(indexes(after10)).toEqual(range(11, 60));
    expect(after10.at(-1)).toMatchObject({ type: 'end', tokens_out: 60 });
    expect((await cancel(taskId)).status).toBe(204);
    expect((await reattach(taskId, 10)).status).toBe(404);
  });

  it('DELETE on an attached dispatch: the client gets end with stop_type cancel, the engine cancels; DELETE unknown → 404', async () => {
    const offset = statSync(logPath).size;
    const taskId = randomUUID();
    const first = await post(longRun(taskId, 3800, 10_000));
    await take(first.events, 3);
    const before = await (await request(`${h.url}/metrics`)).body.text();
    expect(await cancel(taskId)).toEqual({ status: 204, json: undefined });
    const tail = await rest(first.events);
    expect(tail.at(-1)).toMatchObject({ type: 'end', stop_type: 'cancel', pool_id: 'ra', node_id: 'test-node' });
    expect(tail.filter((e) => e.type !== 'token')).toHaveLength(1);
    const engine = await engineReleases(offset, 1);
    expect(engine).toMatch(/cancel task/);
    await slotFree();
    expect(await cancel(taskId)).toMatchObject({ status: 404, json: { code: 'NOT_FOUND' } });
    expect((await reattach(taskId)).status).toBe(404);
    expect(await cancel(randomUUID())).toMatchObject({ status: 404, json: { code: 'NOT_FOUND' } });
    expect((await cancel('not-a-uuid')).status).toBe(400);
    const after = await (await request(`${h.url}/metrics`)).body.text();
    expect(metric(after, 'cancelled')).toBe(metric(before, 'cancelled') + 1);
    expect(h.logs.find((l) => l.task_id === taskId && l.msg === 'dispatch ended')).toMatchObject({
      outcome: 'canceled',
    });
  });

  it('last attacher wins: a second GET ends the first connection without cancelling; the second gets the rest', async () => {
    const offset = statSync(logPath).size;
    const taskId = randomUUID();
    const first = await post(longRun(taskId, 2000, 10_000));
    const head = await take(first.events, 3);
    const a = await reattach(taskId, lastIndex(head));
    // The POST's connection was taken over: it ends without a terminal line.
    const firstRest = await rest(first.events);
    expect(firstRest.every((e) => e.type === 'token')).toBe(true);
    const aHead = await take(a.events, 3);
    expect(indexes(aHead)).toEqual(range(3, 6));
    const b = await reattach(taskId, 5);
    const aRest = await rest(a.events);
    expect(aRest.every((e) => e.type === 'token')).toBe(true);
    const bAll = await rest(b.events);
    expect(indexes(bAll)).toEqual(range(6, 2000));
    expect(bAll.at(-1)).toMatchObject({ type: 'end', tokens_out: 2000 });
    const engine = await engineReleases(offset, 1);
    expect(engine).not.toMatch(/cancel task/);
    await slotFree();
    const reattached = h.logs.filter((l) => l.task_id === taskId && l.msg === 'dispatch re-attached');
    expect(reattached.map((l) => l.attached)).toEqual([true, true]);
  });

  it('without reattach_ms nothing is held: a plain dispatch has no entry and a GET for it is 404', async () => {
    const taskId = randomUUID();
    const { reattach_ms: _none, ...plain } = longRun(taskId, 20, 0);
    const heldBefore = h.manager.held.size;
    const s = await post(plain);
    await take(s.events, 1);
    expect(h.manager.held.size).toBe(heldBefore);
    expect((await reattach(taskId)).status).toBe(404);
    await rest(s.events);
    // reattach_ms is ignored for a non-streamed answer.
    const answer = await request(`${h.url}/v2/pools/ra/completions`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ ...longRun(randomUUID(), 5, 5000), stream: false }),
    });
    expect((JSON.parse(await answer.body.text()) as { type: string }).type).toBe('result');
    expect(h.manager.held.size).toBe(heldBefore);
    await slotFree();
  });

  it('h2c: a dispatch over the h2c listener whose stream is reset is re-attached over h2c', async () => {
    const offset = statSync(logPath).size;
    const taskId = randomUUID();
    const first = await post(longRun(taskId, 500, 10_000), 'h2c');
    expect(first.status).toBe(200);
    const head = await take(first.events, 4);
    first.body.destroy();
    await detached(taskId);
    const again = await reattach(taskId, lastIndex(head), 'h2c');
    expect(again.status).toBe(200);
    const tail = await rest(again.events);
    expect(indexes([...head, ...tail])).toEqual(range(0, 500));
    expect(tail.at(-1)).toMatchObject({ type: 'end', tokens_out: 500 });
    const engine = await engineReleases(offset, 1);
    expect(engine).not.toMatch(/cancel task/);
    await slotFree();
  });
});
