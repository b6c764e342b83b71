// A conversation's turns stay on the pool that holds its prompt cache while it has a free slot,
// and move on without waiting when it has none (fixture nodes report cached prompt tokens the way
// an engine's prompt cache would: the words a prompt shares with one the pool ran before).
import type OpenAI from 'openai';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startCluster as startTestCluster, type Cluster } from '../testing/openai-cluster.js';
import { STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import { storeOf, taskBody, waitFor } from '../testing/test-helpers.js';

// Against both cluster stores: with Redis the queue, task records and sessions are the cluster's.
describe.each(STORE_KINDS)('session affinity across turns (%s store)', (kind) => {
  const stores = storeHarness(kind);
  const startCluster = (nodes: Parameters<typeof startTestCluster>[0], over: Record<string, unknown> = {}) =>
    startTestCluster(nodes, over, storeOf(kind, stores));
  let c: Cluster | undefined;
  afterEach(async () => {
    await c?.close();
    c = undefined;
  });

  /** Starts a task pinned to a pool that holds its slot until cancelled; returns its id. */
  async function occupy(cl: Cluster, poolId: string): Promise<string> {
    const node = cl.nodes.find((n) => n.active(poolId) === 0 && n.snapshots().some((p) => p.pool_id === poolId));
    if (node === undefined) throw new Error(`no idle node with pool ${poolId}`);
    node.nextBehaviours.push({ kind: 'hang' });
    const body = taskBody({ model_ref: 'm', placement: { mode: 'pin', pin_pool_id: poolId, allow_fallback: false } });
    const res = await request(`${cl.url}/v2/tasks`, {
      method: 'POST',
      headers: { ...cl.t.auth, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.statusCode).toBe(202);
    await res.body.dump();
    await waitFor(() => node.active(poolId) === 1, 5000, `pool ${poolId} occupied`);
    return body.task_id as string;
  }

  async function release(cl: Cluster, taskId: string): Promise<void> {
    const res = await request(`${cl.url}/v2/tasks/${taskId}/cancel`, { method: 'POST', headers: cl.t.auth });
    expect(res.statusCode).toBe(204);
    await waitFor(
      () => cl.nodes.every((n) => n.aborts.includes(taskId) || !n.dispatches.some((d) => d.body.task_id === taskId)),
      5000,
      'the release',
    );
    // Placement reads orchestratord's view, which a heartbeat sent before the release may still
    // hold busy for a moment on a loaded machine: the next turn starts once the pool is free there.
    const poolId = cl.nodes.flatMap((n) => n.dispatches).find((d) => d.body.task_id === taskId)?.pool_id;
    for (const deadline = Date.now() + 5000; ;) {
      const res = await request(`${cl.url}/v2/pools`, { headers: cl.t.auth });
      const body = (await res.body.json()) as {
        pools: Array<{ pool_id: string; slots_free: number; slots_total: number }>;
      };
      if (body.pools.every((p) => p.pool_id !== poolId || p.slots_free === p.slots_total)) break;
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for pool ${poolId} to be free in orchestratord's view`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  const poolOf = (cl: Cluster, completionId: string): string | undefined => {
    const taskId = completionId.replace(/^chatcmpl-/, '');
    for (const n of cl.nodes) for (const d of n.dispatches) if (d.body.task_id === taskId) return d.pool_id;
    return undefined;
  };

  it('turn 2 returns to the pool of turn 1 (its cached tokens grow) though placement alone would pick another; a busy pool is not waited for', async () => {
    c = await startCluster([
      { nodeId: 'n1', pools: [{ pool_id: 'pa', models: ['m'], slots: 1 }], tokenIntervalMs: 2 },
      { nodeId: 'n2', pools: [{ pool_id: 'pb', models: ['m'], slots: 1 }], tokenIntervalMs: 2 },
    ]);
    const cl = c;
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You are a poet.' },
      { role: 'user', content: 'Write a haiku about the sea.' },
    ];
    const turn = async (who: { user?: string }, msgs = messages) =>
      cl.client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 3, ...who });

    // Turn 1 lands on pb because pa is busy.
    const holdA = await occupy(cl, 'pa');
    const t1 = await turn({ user: 'alice' });
    expect(poolOf(cl, t1.id)).toBe('pb');
    await release(cl, holdA);

    // Both pools free: least-loaded's tie-break would pick pa (a conversation without a key goes there) …
    const anon = await turn({}, [{ role: 'user', content: 'Unrelated question.' }]);
    expect(poolOf(cl, anon.id)).toBe('pa');
    // … but alice's next turn goes back to pb, where her conversation is cached.
    messages.push(
      { role: 'assistant', content: t1.choices[0]?.message.content ?? '' },
      { role: 'user', content: 'Another, about the wind.' },
    );
    const t2 = await turn({ user: 'alice' });
    expect(poolOf(cl, t2.id)).toBe('pb');
    const cached1 = t1.usage?.prompt_tokens_details?.cached_tokens ?? -1;
    const cached2 = t2.usage?.prompt_tokens_details?.cached_tokens ?? -1;
    expect(cached2).toBe(t1.usage?.prompt_tokens);
    expect(cached2).toBeGreaterThan(cached1);

    // pb busy: turn 3 runs on pa at once rather than waiting for pb.
    const holdB = await occupy(cl, 'pb');
    messages.push(
      { role: 'assistant', content: t2.choices[0]?.message.content ?? '' },
      { role: 'user', content: 'And one about stone.' },
    );
    const started = Date.now();
    const t3 = await turn({ user: 'alice' });
    expect(poolOf(cl, t3.id)).toBe('pa');
    expect(Date.now() - started).toBeLessThan(2000);
    // pa holds only the unrelated conversation: nothing of alice's is cached there.
    expect(t3.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    await release(cl, holdB);

    // From now on pa is the conversation's pool.
    messages.push(
      { role: 'assistant', content: t3.choices[0]?.message.content ?? '' },
      { role: 'user', content: 'Last one.' },
    );
    const t4 = await turn({ user: 'alice' });
    expect(poolOf(cl, t4.id)).toBe('pa');
    expect(t4.usage?.prompt_tokens_details?.cached_tokens).toBe(t3.usage?.prompt_tokens);
    // Turns 2 and 4 stayed, turn 3 moved (turn 1 and the anonymous task had no session pool yet).
    const metrics = await fetch(`${cl.url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/llorch_placement_session_affinity_total\{outcome="kept"\} 2/);
    expect(metrics).toMatch(/llorch_placement_session_affinity_total\{outcome="moved"\} 1/);
  });

  it('the /v2 door keys affinity by session_id, and the X-Session-Id header keys it on /v1', async () => {
    c = await startCluster([
      { nodeId: 'n1', pools: [{ pool_id: 'pa', models: ['m'], slots: 1 }], tokenIntervalMs: 2 },
      { nodeId: 'n2', pools: [{ pool_id: 'pb', models: ['m'], slots: 1 }], tokenIntervalMs: 2 },
    ]);
    const cl = c;
    const sid = '0b0c0d0e-1f20-4a22-8b24-252627282930';
    const holdA = await occupy(cl, 'pa');
    const v2 = taskBody({ model_ref: 'm', session_id: sid, max_tokens: 2 });
    const res = await request(`${cl.url}/v2/tasks`, {
      method: 'POST',
      headers: { ...cl.t.auth, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify(v2),
    });
    expect(res.statusCode).toBe(200);
    expect(await res.body.text()).toMatch(/event: end\ndata: \{[^\n]*"pool_id":"pb"/);
    await release(cl, holdA);
    const next = await cl.client.chat.completions.create(
      { model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 },
      { headers: { 'X-Session-Id': sid } },
    );
    expect(poolOf(cl, next.id)).toBe('pb');
  });
});
