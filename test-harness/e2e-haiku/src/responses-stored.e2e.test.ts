import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, startCluster, waitClusterIdle, type Cluster } from './index.js';

// Stored and background Responses (issue 42) with the official `openai` client against a real
// cluster (orchestratord → pool-managerd → llama-server, synthetic model): a turn continued with
// `previous_response_id` is sent the whole conversation (its input tokens are those of a stateless
// request resending it) and finds the first turn in the engine's prompt cache (one session for the
// chain); a background response runs to its end with nobody reading it, and its events stream again,
// resumed after a sequence number.
const MODEL = 'synthetic:llama?ctx=4096';
const cacheDir = process.env.LLORCH_TEST_CACHE_DIR ?? join(repoRoot(), '.cache', 'llama-orch');

let cluster: Cluster;
let client: OpenAI;

beforeAll(async () => {
  cluster = await startCluster({
    model: MODEL,
    nodes: 1,
    gpu: 'off',
    cacheDir,
    heartbeatMs: 500,
    readyTimeoutMs: 30 * 60_000,
  });
  client = new OpenAI({
    baseURL: `${cluster.orchestrator.url}/v1`,
    apiKey: cluster.token,
    maxRetries: 0,
    timeout: 60_000,
  });
}, 31 * 60_000);

afterAll(async () => {
  await cluster?.close();
}, 60_000);

const INSTRUCTIONS = 'You are a terse assistant for the night shift at a small observatory. Answer in one line.';

describe('stored Responses on a real engine', () => {
  it('previous_response_id: the second turn is sent the whole conversation and reuses the first from the prompt cache', async () => {
    await waitClusterIdle(cluster);
    const first = await client.responses.create({
      model: MODEL,
      instructions: INSTRUCTIONS,
      input: 'Which planet is visible tonight?',
      max_output_tokens: 16,
      temperature: 0,
    });
    expect(first).toMatchObject({ store: true, background: false });
    expect(await client.responses.retrieve(first.id)).toEqual(first);
    const second = await client.responses.create({
      model: MODEL,
      instructions: INSTRUCTIONS,
      previous_response_id: first.id,
      input: 'And at what time does it rise?',
      max_output_tokens: 8,
      temperature: 0,
    });
    const u1 = first.usage!;
    const u2 = second.usage!;
    expect(u2.input_tokens).toBeGreaterThan(u1.input_tokens);
    // The first turn's prompt is still in the slot's cache: the chain kept its session (and pool).
    expect(u2.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(u1.input_tokens - 4);
    // Exactly the prompt of a stateless request that resends the conversation itself.
    const resent = await client.responses.create({
      model: MODEL,
      store: false,
      instructions: INSTRUCTIONS,
      input: [
        { role: 'user', content: 'Which planet is visible tonight?' },
        { role: 'assistant', content: first.output_text },
        { role: 'user', content: 'And at what time does it rise?' },
      ],
      max_output_tokens: 1,
      temperature: 0,
    });
    expect(resent.usage!.input_tokens).toBe(u2.input_tokens);
  });

  it('background: runs to its end with nobody reading; its events stream again and resume after a sequence number', async () => {
    await waitClusterIdle(cluster);
    const created = await client.responses.create({
      model: MODEL,
      input: 'Describe the night sky.',
      background: true,
      max_output_tokens: 32,
      temperature: 0,
    });
    expect(created).toMatchObject({ status: 'queued', background: true });
    const deadline = Date.now() + 60_000;
    let done = await client.responses.retrieve(created.id);
    while (done.status === 'queued' || done.status === 'in_progress') {
      if (Date.now() > deadline) throw new Error(`response ${created.id} stayed ${String(done.status)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
      done = await client.responses.retrieve(created.id);
    }
    expect(['completed', 'incomplete']).toContain(done.status);
    expect(done.usage!.output_tokens).toBeGreaterThan(0);

    const all: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const e of await client.responses.retrieve(created.id, { stream: true })) all.push(e);
    const deltas = all
      .filter((e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === 'response.output_text.delta')
      .map((e) => e.delta)
      .join('');
    expect(deltas).toBe(done.output_text);
    const tail: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const e of await client.responses.retrieve(created.id, { stream: true, starting_after: 4 }))
      tail.push(e);
    expect(tail).toEqual(all.slice(5));
  });
});
