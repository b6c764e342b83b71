import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toCompletionBody } from './completion-body.js';
import { CompletionAbortedError, EngineRejectedError } from './errors.js';
import { LlamaServerClient, type CompletionEvent, type EngineHealth } from './llama-server-client.js';
import { parseSseData } from './testing/sse-parser.js';
import { spawnTestEngine, type TestEngine } from './testing/test-engine.js';
import { completeEvents } from './testing/pull-events.js';

// Real llama-server (shared test cache; the first build takes ~5 minutes) + synthetic llama model.
let engine: TestEngine;
let client: LlamaServerClient;
const healthSeen: EngineHealth[] = [];

beforeAll(async () => {
  engine = await spawnTestEngine({ slots: 1, ctx: 4096 });
  client = new LlamaServerClient({ baseUrl: engine.url });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const h = await client.health();
    if (healthSeen.at(-1) !== h) healthSeen.push(h);
    if (h === 'ready') break;
    if (Date.now() > deadline) throw new Error('llama-server did not become ready');
    await new Promise((r) => setTimeout(r, 5));
  }
}, 45 * 60_000);

afterAll(async () => {
  await client?.close();
  await engine?.stop();
});

async function collect(it: AsyncIterable<CompletionEvent>): Promise<CompletionEvent[]> {
  const out: CompletionEvent[] = [];
  for await (const ev of it) out.push(ev);
  return out;
}

function text(events: CompletionEvent[]): string {
  return events.flatMap((e) => (e.type === 'token' ? [e.t] : [])).join('');
}

/** The same body sent straight to the engine with undici, concatenating `content` of every frame. */
async function direct(body: object): Promise<{ text: string; tokensPredicted: number }> {
  const res = await request(`${engine.url}/completion`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
    reset: true,
  });
  let out = '';
  let predicted = -1;
  for await (const payload of parseSseData(res.body)) {
    const f = JSON.parse(payload) as { content: string; stop: boolean; tokens_predicted?: number };
    out += f.content;
    if (f.stop) predicted = f.tokens_predicted ?? -1;
  }
  return { text: out, tokensPredicted: predicted };
}

async function slotsIdleAfter(start: number, limitMs: number): Promise<number> {
  for (;;) {
    const slots = await client.slots();
    if (slots.every((s) => !s.is_processing)) return performance.now() - start;
    if (performance.now() - start > limitMs) throw new Error('slot still processing');
    await new Promise((r) => setTimeout(r, 2));
  }
}

describe('LlamaServerClient against the real llama-server', () => {
  it('health went down/loading → ready; props and slots describe the engine', async () => {
    expect(healthSeen.at(-1)).toBe('ready');
    expect(healthSeen.every((h) => h === 'down' || h === 'loading' || h === 'ready')).toBe(true);
    const props = await client.props();
    expect(props.total_slots).toBe(1);
    expect(props.n_ctx).toBe(4096);
    expect(props.build_info).toMatch(/^b\d+-[0-9a-f]+$/);
    expect(props.model_path).toBe(engine.modelPath);
    const slots = await client.slots();
    expect(slots).toEqual([{ id: 0, n_ctx: 4096, is_processing: false }]);
  });

  it('streams real tokens and exactly one end; same seed gives the same text as a direct request', async () => {
    const req = { prompt: 'Once upon a time', max_tokens: 16, seed: 42, greedy: false, temperature: 0.8 };
    const a = await collect(completeEvents(client, req));
    const b = await collect(completeEvents(client, req));
    const end = a.at(-1);
    expect(end).toMatchObject({ type: 'end', tokens_out: 16, stop_type: 'limit' });
    expect(end?.type === 'end' && end.decode_ms > 0).toBe(true);
    expect(a.filter((e) => e.type === 'end')).toHaveLength(1);
    const tokens = a.filter((e) => e.type === 'token');
    expect(tokens.length).toBeGreaterThan(0);
    expect(tokens.map((e) => (e.type === 'token' ? e.i : -1))).toEqual(tokens.map((_, i) => i));
    expect(tokens.every((e) => e.type === 'token' && e.t !== '')).toBe(true);
    expect(text(a)).toBe(text(b));
    const d = await direct(toCompletionBody(req));
    expect(d.text).toBe(text(a));
    expect(d.tokensPredicted).toBe(16);
    const other = await collect(completeEvents(client, { ...req, seed: 43 }));
    expect(text(other)).not.toBe(text(a));
  });

  it('sockets are not reused after a stream: alternating streams and probes all succeed', async () => {
    for (let i = 0; i < 6; i++) {
      const ev = await collect(completeEvents(client, { prompt: `round ${i}`, max_tokens: 4, greedy: true }));
      expect(ev.at(-1)?.type).toBe('end');
      expect(await client.health()).toBe('ready');
    }
  });

  it('abort mid-stream closes the socket and the slot goes idle', async () => {
    const ac = new AbortController();
    const seen: CompletionEvent[] = [];
    let abortedAt = 0;
    const err = await (async () => {
      for await (const ev of completeEvents(
        client,
        { prompt: 'a long story', max_tokens: 100_000, greedy: true },
        ac.signal,
      )) {
        seen.push(ev);
        if (seen.length === 3) {
          abortedAt = performance.now();
          ac.abort();
        }
      }
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CompletionAbortedError);
    expect(seen).toHaveLength(3);
    const idleMs = await slotsIdleAfter(abortedAt, 5000);
    process.stderr.write(`[measure] adapter abort → slot idle: ${idleMs.toFixed(1)} ms\n`);
    expect(idleMs).toBeLessThanOrEqual(1000);
    // The next request works (slot free, no poisoned socket).
    expect((await collect(completeEvents(client, { prompt: 'after', max_tokens: 2, greedy: true }))).at(-1)?.type).toBe(
      'end',
    );
  });

  it('leaving the loop early cancels the engine request too', async () => {
    for await (const ev of completeEvents(client, { prompt: 'break early', max_tokens: 100_000, greedy: true })) {
      if (ev.type === 'token') break;
    }
    await slotsIdleAfter(performance.now(), 2000);
  });

  it('an over-long prompt is refused before the stream with the engine message', async () => {
    const err = await collect(completeEvents(client, { prompt: 'word '.repeat(6000), max_tokens: 4 })).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EngineRejectedError);
    expect(err).toMatchObject({ status: 400, errorCode: 'INVALID_PARAMS' });
    expect((err as Error).message).toMatch(/context size/);
  });

  it('metricsText() scrapes the engine counters', async () => {
    const text = await client.metricsText();
    expect(Number(/^llamacpp:tokens_predicted_total (\S+)$/m.exec(text ?? '')?.[1])).toBeGreaterThan(0);
    expect(text).toMatch(/^# TYPE llamacpp:tokens_predicted_total counter$/m);
  });
});
