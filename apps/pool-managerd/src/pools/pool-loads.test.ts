import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorEnvelopeSchema, HandoffFileSchema, PoolStatusSchema, type PoolStatus } from '@llama-orch/contracts';
import { processCmdline } from '../support/pid-files.js';
import { collect, dispatch, poolStatus, startHarness, until, waitReady, type Harness } from '../testing/harness.js';
import { canTransition } from './pool-state.js';

// Models on demand, the node's part (spec 50, loads on request), over real HTTP with real
// llama-server engines on synthetic models. One engine thread each: the machines are small.

async function call(
  h: Harness,
  method: 'POST' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<{ status: number; json: unknown; headers: Record<string, unknown> }> {
  const res = await request(`${h.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${h.token}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.statusCode, json: await res.body.json(), headers: res.headers };
}

const load = (h: Harness, body: Record<string, unknown>) => call(h, 'POST', '/v2/pools', body);
const unload = (h: Harness, id: string, query = '') => call(h, 'DELETE', `/v2/pools/${id}${query}`);

async function poolIds(h: Harness): Promise<string[]> {
  const res = await request(`${h.url}/v2/pools`, { headers: { authorization: `Bearer ${h.token}` } });
  return ((await res.body.json()) as { pools: PoolStatus[] }).pools.map((p) => p.pool_id);
}

/** Resolves once the pool has left the table (GET 404). */
async function gone(h: Harness, id: string, ms = 30_000): Promise<void> {
  await until(
    async () =>
      (await request(`${h.url}/v2/pools/${id}`, { headers: { authorization: `Bearer ${h.token}` } })).statusCode ===
      404,
    `pool ${id} gone`,
    ms,
    20,
  );
}

function enginePid(h: Harness, id: string): number {
  return HandoffFileSchema.parse(JSON.parse(readFileSync(join(h.runtime.engines, `${id}-r0.json`), 'utf8'))).pid;
}

async function metricsText(h: Harness): Promise<string> {
  return (await request(`${h.url}/metrics`)).body.text();
}

/** The states a pool went through, consecutive repeats folded. */
function statesOf(h: Harness, id: string): string[] {
  const seen = h.transitions.filter((t) => t.pool_id === id).map((t) => t.to);
  return seen.filter((s, i) => s !== seen[i - 1]);
}

describe('a node with a YAML pool and on_demand (shared model cache)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      pools: [{ id: 'static', model: 'synthetic:llama', ctx: 512, threads: 1 }],
      onDemand: { memory_budget_bytes: 1024 * 1024 * 1024, max_pools: 4, threads: 1 },
      supervision: { stopTimeoutMs: 3000 },
    });
    await waitReady(h, 'static');
  }, 45 * 60_000);
  afterAll(async () => {
    await h?.close();
  });

  it('POST /v2/pools → provisioning → starting → ready → tokens stream → DELETE → gone, its engine dead', async () => {
    const res = await load(h, { pool_id: 'od1', model: 'synthetic:llama', ctx: 512, aliases: ['tiny'] });
    expect(res.status).toBe(202);
    expect(PoolStatusSchema.parse(res.json)).toMatchObject({
      pool_id: 'od1',
      state: 'provisioning',
      origin: 'catalog',
      ready: false,
      slots_total: 1,
      aliases: ['tiny'],
    });
    // A load coming up is not the node starting: it stays ready for its other pools.
    expect((await request(`${h.url}/readyz`)).statusCode).toBe(200);
    const ready = await waitReady(h, 'od1');
    expect(statesOf(h, 'od1')).toEqual(['provisioning', 'starting', 'ready']);
    // ctx is the engine's per-slot context: 512 asked, capped at the model's 256-token training context.
    expect(ready).toMatchObject({ origin: 'catalog', ctx: 256, models: expect.arrayContaining(['synthetic:llama']) });
    // Never used: idle since it was first ready; it takes memory (the engine runs).
    expect(Date.parse(ready.idle_since ?? '')).toBeGreaterThan(Date.now() - 60_000);
    expect(ready.memory_bytes).toBeGreaterThan(9_000_000);
    const static_ = await poolStatus(h, 'static');
    expect('origin' in static_).toBe(false);
    expect(static_.memory_bytes).toBeGreaterThan(9_000_000);

    const d = await dispatch(h, 'od1', { prompt: 'Once upon a time', max_tokens: 8, seed: 1 });
    expect(d.status).toBe(200);
    const busy = await poolStatus(h, 'od1');
    expect(busy.active_leases).toBe(1);
    expect('idle_since' in busy).toBe(false); // a slot is leased
    const events = await collect(d.events);
    expect(events.at(-1)).toMatchObject({ type: 'end', tokens_out: 8, pool_id: 'od1' });
    expect(events.filter((e) => e.type === 'token')).toHaveLength(8);
    const idle = await poolStatus(h, 'od1');
    expect(Date.parse(idle.idle_since ?? '')).toBeGreaterThan(Date.parse(ready.idle_since ?? ''));

    const pid = enginePid(h, 'od1');
    expect(processCmdline(pid)?.[0]).toMatch(/llama-server$/);
    const del = await unload(h, 'od1');
    expect(del.status).toBe(202);
    expect(PoolStatusSchema.parse(del.json)).toMatchObject({ pool_id: 'od1', state: 'draining', ready: false });
    await gone(h, 'od1');
    expect(await poolIds(h)).toEqual(['static']);
    await until(() => processCmdline(pid) === undefined, 'engine process gone', 10_000);
    expect(existsSync(join(h.runtime.engines, 'od1-r0.json'))).toBe(false);
    expect(existsSync(join(h.runtime.pids, 'od1-r0.pid'))).toBe(false);
    expect(statesOf(h, 'od1')).toEqual(['provisioning', 'starting', 'ready', 'draining', 'stopped']);
    const text = await metricsText(h);
    expect(text).toMatch(/^llorch_pool_loads_total\{outcome="ready"\} 1$/m);
    expect(text).toMatch(/^llorch_pool_unloads_total 1$/m);
    expect(text).not.toMatch(/llorch_pool_slots\{pool_id="od1"\}/);
  });

  it('refusals: a taken pool id 409, an unload of the YAML pool 409, an unknown pool 404, a reload of a load 409', async () => {
    const taken = await load(h, { pool_id: 'static', model: 'synthetic:llama' });
    expect(taken.status).toBe(409);
    expect(ErrorEnvelopeSchema.parse(taken.json)).toMatchObject({ code: 'CONFLICT', retriable: false });
    expect((taken.json as { message: string }).message).toMatch(/pool id 'static' is taken/);

    const yaml = await unload(h, 'static');
    expect(yaml.status).toBe(409);
    expect(ErrorEnvelopeSchema.parse(yaml.json)).toMatchObject({ code: 'CONFLICT' });
    expect((yaml.json as { message: string }).message).toMatch(/only pools loaded on request/);
    expect((await poolStatus(h, 'static')).state).toBe('ready');

    const unknown = await unload(h, 'nope');
    expect(unknown.status).toBe(404);
    expect(ErrorEnvelopeSchema.parse(unknown.json).code).toBe('NOT_FOUND');

    expect((await unload(h, 'static', '?deadline_ms=soon')).status).toBe(400);
    expect((await load(h, { pool_id: 'x', model: 'synthetic:llama', bogus: 1 })).status).toBe(400);

    expect((await load(h, { pool_id: 'rl', model: 'synthetic:llama', ctx: 256 })).status).toBe(202);
    const reload = await call(h, 'POST', '/v2/pools/rl/reload', { new_model_ref: 'synthetic:llama?seed=3' });
    expect(reload.status).toBe(409);
    expect(ErrorEnvelopeSchema.parse(reload.json).code).toBe('CONFLICT');
    expect((await unload(h, 'rl')).status).toBe(202);
    await gone(h, 'rl');
    // The 409 of the taken id (a malformed body is not a load: 400 before any).
    expect(await metricsText(h)).toMatch(/^llorch_pool_loads_total\{outcome="refused"\} 1$/m);
  });

  it('a DELETE while a dispatch streams lets it finish within the deadline; new work is refused; a second DELETE answers the same', async () => {
    expect((await load(h, { pool_id: 'busy', model: 'synthetic:llama?ctx=4096', ctx: 4096 })).status).toBe(202);
    await waitReady(h, 'busy');
    const pid = enginePid(h, 'busy');
    // Long enough (seconds) that the DELETE and the refused dispatch surely come while it streams.
    const d = await dispatch(h, 'busy', { prompt: 'finish me', max_tokens: 2000, greedy: true });
    expect((await d.events.next()).value?.type).toBe('token');
    const del = await unload(h, 'busy', '?deadline_ms=60000');
    expect(del.status).toBe(202);
    expect(del.json).toMatchObject({ state: 'draining', active_leases: 1 });
    const again = await unload(h, 'busy');
    expect(again.status).toBe(202);
    expect(again.json).toMatchObject({ state: 'draining' });
    const refused = await dispatch(h, 'busy', { prompt: 'late', max_tokens: 4 });
    expect(refused.status).toBe(503);
    expect(refused.json).toMatchObject({ code: 'POOL_UNREADY' });
    const rest = await collect(d.events);
    expect(rest.at(-1)).toMatchObject({ type: 'end', tokens_out: 2000, stop_type: 'limit' });
    expect(rest.filter((e) => e.type === 'token')).toHaveLength(1999);
    await gone(h, 'busy');
    await until(() => processCmdline(pid) === undefined, 'engine process gone', 10_000);
  });

  it('a DELETE whose deadline passes ends the stream with an error, then the pool goes', async () => {
    expect((await load(h, { pool_id: 'cut', model: 'synthetic:llama?ctx=4096', ctx: 4096 })).status).toBe(202);
    await waitReady(h, 'cut');
    const d = await dispatch(h, 'cut', { prompt: 'go on', max_tokens: 4000, greedy: true });
    expect((await d.events.next()).value?.type).toBe('token');
    const t0 = performance.now();
    expect((await unload(h, 'cut', '?deadline_ms=300')).status).toBe(202);
    const rest = await collect(d.events);
    const ms = performance.now() - t0;
    expect(rest.at(-1)).toMatchObject({ type: 'error' });
    expect(rest.filter((e) => e.type === 'token').length).toBeLessThan(3999);
    expect(ms).toBeLessThan(5000);
    await gone(h, 'cut');
  });

  it('every transition went through the state machine', () => {
    expect(h.illegalTransitions()).toEqual([]);
    expect(h.transitions.every((t) => canTransition(t.from, t.to))).toBe(true);
  });
});

describe('a node with only on_demand (no YAML pool; a model cache of its own)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      pools: [],
      onDemand: { memory_budget_bytes: 256 * 1024 * 1024, max_pools: 2, threads: 1 },
      supervision: { stopTimeoutMs: 3000 },
      ownModelCache: true,
    });
  }, 45 * 60_000);
  afterAll(async () => {
    await h?.close();
  });

  it('starts with no pool and is ready', async () => {
    expect(await poolIds(h)).toEqual([]);
    expect((await request(`${h.url}/readyz`)).statusCode).toBe(200);
  });

  it('memory: a model not here yet is admitted, then fails before its engine starts; once here, the same load is refused at once (503)', async () => {
    // 1,048,576 tokens of context: a 512 MiB KV cache and a 1 GiB attention mask, over the 256 MiB budget.
    const late = await load(h, { pool_id: 'late', model: 'synthetic:llama', ctx: 1_048_576 });
    expect(late.status).toBe(202);
    const failed = await until(
      async () => {
        const s = await poolStatus(h, 'late');
        return s.state === 'failed' ? s : undefined;
      },
      'late failed',
      120_000,
      20,
    );
    expect(failed.last_error).toMatch(
      /^pool 'late' does not fit: its engine needs \d+ MiB \(model [\d.]+ \+ KV 512 \+ compute 102\d \+ output [\d.]+ \+ engine 22 MiB, by llama-fit-params\); the node has 256 MiB free of its 256 MiB budget \(its pools take 0 MiB\)$/,
    );
    expect('memory_bytes' in failed).toBe(false); // it holds nothing
    expect(existsSync(join(h.runtime.pids, 'late-r0.pid'))).toBe(false); // no engine was started
    expect(statesOf(h, 'late')).toEqual(['provisioning', 'failed']);

    const big = await load(h, { pool_id: 'big', model: 'synthetic:llama', ctx: 1_048_576 });
    expect(big.status).toBe(503);
    expect(big.headers['retry-after']).toBeDefined();
    expect(ErrorEnvelopeSchema.parse(big.json)).toMatchObject({ code: 'INSUFFICIENT_MEMORY', retriable: true });
    expect((big.json as { message: string }).message).toMatch(/^pool 'big' does not fit: its engine needs \d+ MiB/);
    expect(await poolIds(h)).toEqual(['late']);
    const text = await metricsText(h);
    expect(text).toMatch(/^llorch_pool_loads_total\{outcome="failed"\} 1$/m);
    expect(text).toMatch(/^llorch_pool_loads_total\{outcome="refused"\} 1$/m);
  });

  it('max_pools: a third load is refused (503) while two are listed; unloading the failed one makes room', async () => {
    expect((await load(h, { pool_id: 'a', model: 'synthetic:llama', ctx: 256 })).status).toBe(202);
    const a = await waitReady(h, 'a');
    expect(a.memory_bytes).toBeGreaterThan(0);
    const third = await load(h, { pool_id: 'b', model: 'synthetic:llama', ctx: 256 });
    expect(third.status).toBe(503);
    expect(ErrorEnvelopeSchema.parse(third.json)).toMatchObject({ code: 'INSUFFICIENT_MEMORY', retriable: true });
    expect((third.json as { message: string }).message).toMatch(
      /already runs 2 pools loaded on request, its max_pools/,
    );
    const del = await unload(h, 'late');
    expect(del.status).toBe(202);
    expect(del.json).toMatchObject({ state: 'draining' });
    await gone(h, 'late');
    expect((await load(h, { pool_id: 'b', model: 'synthetic:llama', ctx: 256 })).status).toBe(202);
    await waitReady(h, 'b');
    expect(await poolIds(h)).toEqual(['a', 'b']);
  });
});
