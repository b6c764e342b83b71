// Non-streamed /v1 requests (issue 28) against FIXTURE nodes: the dispatch asks for one answer
// (`stream: false`), failover before the answer, and what a /v2 reader of the task sees.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from '../testing/openai-cluster.js';
import { TOKEN } from '../testing/test-helpers.js';

const POOL = { pool_id: 'p', models: ['synthetic:llama'], aliases: ['tiny-chat'], slots: 1, engine_version: 'b1-test' };

describe('/v1 non-streamed answers', () => {
  let c: Cluster | undefined;
  afterEach(async () => {
    await c?.close();
    c = undefined;
  });

  it("one result from the node, the node's body with the door's id, created and model; under /v2 the task has no token frames", async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [POOL], tokenIntervalMs: 2 }]);
    const res = await c.client.completions.create({ model: 'tiny-chat', prompt: 'a b c', max_tokens: 4 });
    expect(res).toMatchObject({
      object: 'text_completion',
      model: 'tiny-chat',
      system_fingerprint: 'b1-test',
      choices: [{ text: 'tok0 tok1 tok2 tok3 ', finish_reason: 'length' }],
    });
    expect(res.id).toMatch(/^cmpl-[0-9a-f-]{36}$/);
    // The engine's extra members ride along unchanged.
    expect((res as unknown as { timings: unknown }).timings).toMatchObject({ predicted_n: 4 });
    expect(c.nodes[0]?.dispatches[0]?.body).toMatchObject({ workload: 'completion', stream: false, max_tokens: 4 });
    const taskId = res.id.slice('cmpl-'.length);
    const events = await request(`${c.url}/v2/tasks/${taskId}/events`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const text = await events.body.text();
    const names = [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
    expect(names[0]).toBe('started');
    expect(names).not.toContain('token');
    expect(names.at(-1)).toBe('end');
    expect(text).toMatch(/"tokens_out":4/);
    const metrics = await (await request(`${c.url}/metrics`)).body.text();
    expect(metrics).toMatch(/llorch_tokens_out_total\{[^}]*pool_id="p"[^}]*\} 4/);
  });

  it('a node lost before it answered: the task is re-placed on the other node and answered there', async () => {
    c = await startCluster([
      { nodeId: 'n1', pools: [POOL], tokenIntervalMs: 2 },
      { nodeId: 'n2', pools: [POOL], tokenIntervalMs: 2 },
    ]);
    const [n1, n2] = c.nodes;
    // Equal pools: least-loaded breaks the tie by node id, so the first attempt goes to n1.
    n1?.nextBehaviours.push({ kind: 'crash-before-first-token' });
    const res = await c.client.chat.completions.create({
      model: 'tiny-chat',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 2,
    });
    expect(res.choices[0]?.message.content).toBe('tok0 tok1 ');
    expect(n1?.dispatches.map((d) => d.body.stream)).toEqual([false]);
    expect(n2?.dispatches.map((d) => d.body.stream)).toEqual([false]);
    expect(n2?.completed).toHaveLength(1);
  });
});
