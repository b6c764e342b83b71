import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DispatchEventSchema,
  DispatchResultEventSchema,
  HandoffFileSchema,
  type ChatMessage,
} from '@llama-orch/contracts';
import { answerRequestOf, type AnswerInput } from '@llama-orch/llamacpp-adapter';
import { poolStatus, startHarness, until, waitReady, type Harness } from '../testing/harness.js';

// Non-streamed dispatches (`stream: false`) through an in-process pool-managerd to one real
// llama-server pool (synthetic model with its chat template, 1 slot, 4096-token context so a long
// generation stays in flight for seconds).
let h: Harness;

beforeAll(async () => {
  h = await startHarness({
    pools: [{ id: 'ans', model: 'synthetic:llama?ctx=4096', ctx: 4096, slots: 1, threads: 1 }],
    supervision: { stopTimeoutMs: 3000 },
  });
  await waitReady(h, 'ans');
}, 45 * 60_000);

afterAll(async () => {
  await h?.close();
});

function engineUrl(): string {
  return HandoffFileSchema.parse(JSON.parse(readFileSync(join(h.runtime.engines, 'ans-r0.json'), 'utf8'))).url;
}

/** The one NDJSON line of a non-streamed dispatch, raw. */
async function answerLine(body: Record<string, unknown>): Promise<string> {
  const res = await request(`${h.url}/v2/pools/ans/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${h.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ task_id: crypto.randomUUID(), stream: false, ...body }),
    reset: true,
  });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toContain('application/x-ndjson');
  const text = await res.body.text();
  expect(text.endsWith('\n')).toBe(true);
  expect(text.indexOf('\n')).toBe(text.length - 1);
  return text;
}

/** The same engine request the dispatch makes, sent straight to the engine. */
async function direct(input: AnswerInput): Promise<Record<string, unknown>> {
  const { path, body } = answerRequestOf(input);
  const res = await request(`${engineUrl()}${path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
    reset: true,
  });
  expect(res.statusCode).toBe(200);
  return (await res.body.json()) as Record<string, unknown>;
}

/** A body without what differs between two runs of the same request: its id, creation time and timing values. */
function comparable(body: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, created: _created, timings, ...rest } = body;
  return { ...rest, timing_keys: Object.keys(timings as object).sort() };
}

async function engineSlots(): Promise<Array<{ is_processing: boolean; next_token?: Array<{ n_decoded: number }> }>> {
  const res = await request(`${engineUrl()}/slots`);
  return (await res.body.json()) as Array<{ is_processing: boolean; next_token?: Array<{ n_decoded: number }> }>;
}

const conversation: ChatMessage[] = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'One line about tides.' },
];

describe('non-streamed dispatch to the real llama-server', () => {
  it("a chat answers with one result event carrying the engine's own non-streamed body", async () => {
    const req = { workload: 'chat' as const, messages: conversation, max_tokens: 24, seed: 42, greedy: true };
    const line = await answerLine(req);
    const ev = DispatchResultEventSchema.parse(JSON.parse(line));
    expect(ev).toMatchObject({
      type: 'result',
      tokens_out: 24,
      stop_type: 'limit',
      finish_reason: 'length',
      cached_tokens: 0,
      pool_id: 'ans',
      node_id: 'test-node',
    });
    expect(ev.prompt_tokens).toBeGreaterThan(10);
    expect(ev.engine_version).toMatch(/^b\d+-/);
    expect(ev.body.object).toBe('chat.completion');
    const engine = await direct(req);
    expect(comparable(ev.body)).toEqual(comparable(engine));
    expect((ev.body.usage as { completion_tokens: number }).completion_tokens).toBe(ev.tokens_out);
    expect(h.logs.some((l) => l.msg === 'dispatch started' && l.stream === false)).toBe(true);
    expect(
      h.logs.some(
        (l) => l.msg === 'dispatch ended' && l.stream === false && l.outcome === 'end' && l.tokens_out === 24,
      ),
    ).toBe(true);
    const metrics = await (await request(`${h.url}/metrics`)).body.text();
    expect(metrics).toMatch(/llorch_dispatch_tokens_out_total\{pool_id="ans"\} [1-9]/);
  });

  it("a completion answers with the engine's /v1/completions body, logprobs as the engine gave them", async () => {
    const req = {
      workload: 'completion' as const,
      prompt: 'The tide came in',
      max_tokens: 6,
      seed: 7,
      greedy: true,
      sampling: { logprobs: true, top_logprobs: 2 },
    };
    const ev = DispatchResultEventSchema.parse(JSON.parse(await answerLine(req)));
    expect(ev.body.object).toBe('text_completion');
    const choice = (ev.body.choices as Array<{ text: string; logprobs: { content: unknown[] } }>)[0];
    expect(choice?.text.length).toBeGreaterThan(0);
    expect(choice?.logprobs.content).toHaveLength(6);
    expect(comparable(ev.body)).toEqual(comparable(await direct(req)));
  });

  it('an engine refusal (prompt over the context) is one error event, INVALID_PARAMS, not retriable', async () => {
    const line = await answerLine({ workload: 'completion', prompt: 'word '.repeat(5000), max_tokens: 4 });
    expect(DispatchEventSchema.parse(JSON.parse(line))).toMatchObject({
      type: 'error',
      code: 'INVALID_PARAMS',
      retriable: false,
    });
    expect((await poolStatus(h, 'ans')).slots_free).toBe(1);
  });

  it('a client that leaves during a long generation aborts the engine request: the slot is freed before the generation could end', async () => {
    const maxTokens = 3800;
    const ac = new AbortController();
    const res = await request(`${h.url}/v2/pools/ans/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.token}`, 'content-type': 'application/json' },
      signal: ac.signal,
      // logit_bias bans the end-of-text token (id 2): the generation runs to max_tokens unless cancelled.
      body: JSON.stringify({
        task_id: crypto.randomUUID(),
        stream: false,
        workload: 'completion',
        prompt: 'hold the slot',
        max_tokens: maxTokens,
        greedy: true,
        sampling: { logit_bias: { 2: -100 } },
      }),
    });
    expect(res.statusCode).toBe(200);
    await until(async () => (await engineSlots())[0]?.is_processing === true, 'engine slot busy', 10_000, 5);
    // How the engine ended the task, from its own log (the file its 'engine spawned' line names): not
    // by polling /slots, whose results kept a cancelled non-streamed generation running in unpatched
    // llama.cpp (server_response::recv_with_timeout restarted its 1 s wait on every result; see
    // cancel-under-load.test.ts for the patched engine under load), nor by n_decoded afterwards, which
    // a released slot reads as 0.
    const logPath = h.logs.find((l) => l.msg === 'engine spawned' && l.pool_id === 'ans')?.log as string;
    const offset = statSync(logPath).size;
    res.body.on('error', () => undefined);
    ac.abort();
    const released = await until(
      () => /stop processing: n_tokens = (\d+)/.exec(readFileSync(logPath, 'utf8').slice(offset)),
      'slot release in the engine log',
      30_000,
      50,
    );
    const engineLines = readFileSync(logPath, 'utf8').slice(offset, offset + 2000);
    expect(engineLines, 'the engine cancelled the task').toMatch(/cancel task/);
    expect(Number(released[1]), engineLines).toBeLessThan(maxTokens);
    await until(async () => (await poolStatus(h, 'ans')).slots_free === 1, 'lease released', 5000);
    await until(() => h.logs.some((l) => l.msg === 'dispatch canceled'), 'dispatch canceled logged', 5000);
    expect(h.logs.some((l) => l.msg === 'dispatch ended' && l.outcome === 'canceled' && l.stream === false)).toBe(true);
  });
});
