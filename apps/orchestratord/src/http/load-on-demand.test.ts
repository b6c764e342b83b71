// Load on first request (.specs/67-models-on-demand.md) against both cluster stores: a task for a
// catalog model no pool serves makes one load, waits in the queue while the pool prepares, and ends
// MODEL_LOAD_FAILED with the node's reason when the load fails. The on-demand node is a real socket
// (testing/on-demand-node.ts); the test reports its pools through the node API, as pool-managerd does.
import type { NodeMemory, PoolSnapshot } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import type { AppTuning } from '../app.js';
import { onDemandNode, refusal, type OnDemandNode } from '../testing/on-demand-node.js';
import { STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import {
  frames,
  heartbeatNode,
  makeApp as makeTestApp,
  registerNode,
  snapshot,
  storeOf,
  taskBody,
  waitFor,
  type TestApp,
} from '../testing/test-helpers.js';

const GiB = 1024 ** 3;
const REF = 'hf:org/repo/embedder.Q8_0.gguf';
const MEMORY: NodeMemory = { budget_bytes: 8 * GiB, used_bytes: 0 };

describe.each(STORE_KINDS)('load on first request (%s store)', (kind) => {
  const stores = storeHarness(kind);
  let t: TestApp | undefined;
  let n: OnDemandNode | undefined;
  afterEach(async () => {
    clearInterval(beat);
    await t?.close();
    t = undefined;
    await n?.close();
    n = undefined;
  });

  /** The node's pools as last reported; re-sent every 300 ms, so the node stays online however long a test waits. */
  let reported: PoolSnapshot[] = [];
  let beat: NodeJS.Timeout | undefined;
  const node = (app: TestApp, pools: PoolSnapshot[]): Promise<void> => {
    reported = pools;
    return heartbeatNode(app, 'n1', pools, MEMORY);
  };
  const pool = (poolId: string, over: Partial<PoolSnapshot>): PoolSnapshot =>
    snapshot({ pool_id: poolId, origin: 'catalog', models: [REF], aliases: ['lazy'], ...over });

  async function setUp(tuning: AppTuning = {}): Promise<{ app: TestApp; node: OnDemandNode }> {
    const app = await makeTestApp({}, tuning, undefined, undefined, storeOf(kind, stores));
    t = app;
    n = await onDemandNode();
    reported = [];
    await registerNode(app, 'n1', [], n.url, MEMORY);
    beat = setInterval(() => void heartbeatNode(app, 'n1', reported, MEMORY).catch(() => undefined), 300);
    const put = await app.app.inject({
      method: 'POST',
      url: '/v2/catalog/models',
      headers: app.auth,
      payload: { ref: REF, aliases: ['lazy'], slots: 2 },
    });
    expect(put.statusCode, put.body).toBe(201);
    return { app, node: n };
  }

  /** Like pool-managerd: a load it accepted is reported at once (its heartbeat right after the 202). */
  function reportLoadsAsProvisioning(app: TestApp, on: OnDemandNode): void {
    const answer = on.answerLoad;
    on.answerLoad = (body) => {
      void node(app, [pool(body.pool_id, { state: 'provisioning', ready: false, slots_free: 0 })]);
      return answer(body);
    };
  }

  const admit = (app: TestApp, model: string) =>
    app.app.inject({
      method: 'POST',
      url: '/v2/tasks',
      headers: app.auth,
      payload: taskBody({ model_ref: model, workload: 'completion' }),
    });

  it('tasks for a catalog alias no pool serves load it once, wait in the queue while it prepares, and end MODEL_LOAD_FAILED with the reason when the load fails', async () => {
    const { app, node: on } = await setUp();
    reportLoadsAsProvisioning(app, on);
    const answers = await Promise.all(Array.from({ length: 5 }, () => admit(app, 'lazy')));
    for (const a of answers) expect(a.statusCode, a.body).toBe(202);
    expect(on.loads).toHaveLength(1);
    expect(on.loads[0]).toMatchObject({ model: REF, aliases: ['lazy'], slots: 2, serve: 'generate' });
    // waiting: the stream stays open until the load's outcome
    const ids = answers.map((a) => String(a.json().task_id));
    const streams = ids.map((id) =>
      app.app.inject({ method: 'GET', url: `/v2/tasks/${id}/events`, headers: app.auth }),
    );
    await new Promise((r) => setTimeout(r, 100));
    const poolId = on.loads[0]!.pool_id;
    await node(app, [pool(poolId, { state: 'failed', ready: false, slots_free: 0, last_error: 'sha256 mismatch' })]);
    for (const s of await Promise.all(streams)) {
      const last = frames(s.body).at(-1);
      expect(last?.event, s.body).toBe('error');
      expect(last?.data).toMatchObject({ code: 'MODEL_LOAD_FAILED', retriable: false });
      expect(String(last?.data.message)).toContain('sha256 mismatch');
    }
  });

  it('a task admitted while its model loads is dispatched once the pool is ready', async () => {
    const { app, node: on } = await setUp();
    reportLoadsAsProvisioning(app, on);
    const first = await admit(app, REF);
    expect(first.statusCode, first.body).toBe(202);
    expect(first.json().queue_position).toBeGreaterThanOrEqual(0);
    const poolId = on.loads[0]!.pool_id;
    // the pool as listed now: preparing; a second task joins the wait without another load
    const second = await admit(app, 'lazy');
    expect(second.statusCode, second.body).toBe(202);
    expect(on.loads).toHaveLength(1);
    const placed = (): number => app.logs.records().filter((l) => l.msg === 'task placed').length;
    expect(placed()).toBe(0);
    await node(app, [pool(poolId, { state: 'ready', ready: true, slots_total: 2, slots_free: 2 })]);
    await waitFor(() => placed() >= 2, 10_000, 'both tasks placed on the loaded pool');
  });

  it('no node with room: tasks wait in the queue (202) for room, one ends DEADLINE_UNMET at its deadline, the other runs once a load fits; an unknown name stays 404', async () => {
    const { app, node: on } = await setUp({ roomRetryMs: 50 });
    on.answerLoad = () => refusal(503, 'INSUFFICIENT_MEMORY', 'needs 9 GiB, 8 GiB free');
    const patient = await admit(app, 'lazy');
    expect(patient.statusCode, patient.body).toBe(202);
    const hasty = await app.app.inject({
      method: 'POST',
      url: '/v2/tasks',
      headers: app.auth,
      payload: taskBody({ model_ref: 'lazy', deadline_ms: 600 }),
    });
    expect(hasty.statusCode, hasty.body).toBe(202);
    const hastyEnd = await app.app.inject({
      method: 'GET',
      url: `/v2/tasks/${String(hasty.json().task_id)}/events`,
      headers: app.auth,
    });
    const last = frames(hastyEnd.body).at(-1);
    expect(last?.event, hastyEnd.body).toBe('error');
    expect(last?.data).toMatchObject({ code: 'DEADLINE_UNMET' });
    expect(on.loads.length, 'the load is tried again while tasks wait').toBeGreaterThan(2);
    // room appears: the next try loads it, and the waiting task is placed once the pool is ready
    const tries = on.loads.length;
    on.answerLoad = (body) => {
      void node(app, [pool(body.pool_id, { state: 'provisioning', ready: false, slots_free: 0 })]);
      return { status: 202, body: { pool_id: body.pool_id } };
    };
    await waitFor(() => on.loads.length > tries, 5000, 'a load once room appeared');
    const poolId = on.loads.at(-1)!.pool_id;
    await waitFor(() => app.logs.records().some((l) => l.msg === 'model load started'), 5000, 'the load started');
    await node(app, [pool(poolId, { state: 'ready', ready: true, slots_total: 2, slots_free: 2 })]);
    await waitFor(
      () => app.logs.records().some((l) => l.msg === 'task placed' && l.task_id === patient.json().task_id),
      5000,
      'the waiting task placed',
    );
    const unknown = await admit(app, 'no-such-model');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ code: 'MODEL_NOT_FOUND' });
  });
});
