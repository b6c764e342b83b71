// The admitting request's correlation id travels with the task: on every dispatch to a node
// (HTTP/1.1 and h2c, re-placements included) and on every log line about the task.
import type { TaskRequestInput } from '@llama-orch/contracts';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { makeApp, openSse, taskBody, TOKEN, type TestApp } from '../testing/test-helpers.js';

// Offline after 3 missed heartbeats: 750 ms of silence, above a loaded machine's event-loop stalls.
const HB_MS = 250;

describe('X-Correlation-Id across the hop to pool-managerd', () => {
  let t: TestApp | undefined;
  const nodes: FixturePoolManager[] = [];
  afterEach(async () => {
    await t?.close();
    await Promise.all(nodes.splice(0).map((n) => n.close()));
  });

  async function cluster(h2c: boolean, nodeIds: string[]): Promise<string> {
    t = await makeApp({ heartbeat_interval_ms: HB_MS, dispatch_http1_per_node: h2c ? 0 : 8 }, { tickMs: 20 });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const address = t.app.server.address();
    const url = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
    for (const [i, nodeId] of nodeIds.entries()) {
      const node = await FixturePoolManager.start({
        nodeId,
        pools: [{ pool_id: `p${i}`, models: ['m'], slots: 1 }],
        token: TOKEN,
        tokenIntervalMs: 5,
        h2c,
      });
      nodes.push(node);
      await node.startHeartbeats(url, HB_MS);
    }
    return url;
  }

  async function run(
    url: string,
    headers: Record<string, string>,
    over: Partial<TaskRequestInput> = {},
  ): Promise<{ id: string; correlation: string }> {
    const app = t as TestApp;
    const body = taskBody({ max_tokens: 3, ...over });
    const res = await request(`${url}/v2/tasks`, {
      method: 'POST',
      headers: { ...app.auth, ...headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = (await res.body.json()) as { streams: { sse: string } };
    expect(res.statusCode).toBe(202);
    const s = await openSse(json.streams.sse, app.auth);
    await s.done;
    expect(s.frames.at(-1)?.event).toBe('end');
    return { id: body.task_id as string, correlation: String(res.headers['x-correlation-id']) };
  }

  it.each([
    ['HTTP/1.1', false],
    ['h2c', true],
  ])(
    "a dispatch over %s carries the admitting request's id; so does every log line about the task",
    async (_proto, h2c) => {
      const url = await cluster(h2c, ['n1']);
      const { id } = await run(url, { 'x-correlation-id': 'corr-dispatch-1' });
      const node = nodes[0] as FixturePoolManager;
      expect(node.dispatches).toHaveLength(1);
      expect(node.dispatches[0]).toMatchObject({
        correlationId: 'corr-dispatch-1',
        httpVersion: h2c ? '2.0' : '1.1',
        body: { task_id: id },
      });
      // Lines of the task itself; a stream subscriber's lines carry its own request's id.
      const lines = (t as TestApp).logs
        .records()
        .filter((r) => r.task_id === id && !String(r.msg).startsWith('stream subscriber'));
      expect(lines.map((r) => r.msg)).toEqual(
        expect.arrayContaining(['task admitted', 'task placed', 'dispatch accepted', 'stream started', 'task ended']),
      );
      for (const line of lines)
        expect(line, String(line.msg)).toMatchObject({ correlation_id: 'corr-dispatch-1', task_id: id });
    },
  );

  it("a task admitted without an id carries the one orchestratord made (the 202's), on each of its dispatches", async () => {
    const url = await cluster(false, ['n1', 'n2']);
    const [n1, n2] = nodes as [FixturePoolManager, FixturePoolManager];
    n1.nextBehaviours.push({ kind: 'crash-before-first-token' });
    const { id, correlation } = await run(
      url,
      {},
      { placement: { mode: 'prefer', prefer_pools: ['p0'], allow_fallback: true } },
    );
    expect(correlation).toMatch(/^[0-9a-f-]{36}$/);
    expect([...n1.dispatches, ...n2.dispatches].map((d) => [d.body.task_id, d.correlationId])).toEqual([
      [id, correlation],
      [id, correlation],
    ]);
    const requeued = (t as TestApp).logs.records().find((r) => r.task_id === id && r.msg === 'task re-queued');
    expect(requeued).toMatchObject({ correlation_id: correlation });
  });
});
