import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineRejectedError } from './errors.js';
import { LlamaServerClient, type CompletionEvent } from './llama-server-client.js';
import { spawnTestEngine, type TestEngine } from './testing/test-engine.js';

// Real llama-server engines (shared test cache) for the routes besides generation (issue 27): the
// synthetic embedding model with `--embeddings`, and the synthetic generator with FIM tokens.
let embedEngine: TestEngine;
let fimEngine: TestEngine;
let embed: LlamaServerClient;
let fim: LlamaServerClient;

async function ready(client: LlamaServerClient): Promise<void> {
  const deadline = Date.now() + 60_000;
  while ((await client.health()) !== 'ready') {
    if (Date.now() > deadline) throw new Error('llama-server did not become ready');
    await new Promise((r) => setTimeout(r, 20));
  }
}

beforeAll(async () => {
  embedEngine = await spawnTestEngine({ model: 'synthetic:llama?role=embed', ctx: 1024, extra: ['--embeddings'] });
  fimEngine = await spawnTestEngine({ model: 'synthetic:llama?fim=1', ctx: 1024 });
  embed = new LlamaServerClient({ baseUrl: embedEngine.url });
  fim = new LlamaServerClient({ baseUrl: fimEngine.url });
  await Promise.all([ready(embed), ready(fim)]);
}, 45 * 60_000);

afterAll(async () => {
  await Promise.all([embed?.close(), fim?.close()]);
  await Promise.all([embedEngine?.stop(), fimEngine?.stop()]);
});

describe('engine routes besides generation', () => {
  it('asks the engine whether its model fills in the middle (/props does not say)', async () => {
    expect(await fim.supportsInfill()).toBe(true);
    expect(await embed.supportsInfill()).toBe(false);
  });

  it("embeddings: the engine's body as it came, with its prompt tokens", async () => {
    const answer = await embed.call({ kind: 'embeddings', body: { input: ['a b', 'c'], encoding_format: 'float' } });
    expect(answer.figures).toMatchObject({
      tokens_out: 0,
      prompt_tokens: (answer.body.usage as { prompt_tokens: number }).prompt_tokens,
    });
    expect(answer.figures.prompt_tokens).toBeGreaterThan(2);
    const data = answer.body.data as Array<{ embedding: number[] }>;
    expect(data).toHaveLength(2);
    expect(data[0]!.embedding).toHaveLength(64);
    expect(JSON.parse(answer.text)).toEqual(answer.body);
  });

  it('infill, answered once and streamed: the same text', async () => {
    const body = { input_prefix: 'int main() {', input_suffix: '}', n_predict: 6, seed: 3, temperature: 0 };
    const once = await fim.call({ kind: 'infill', body });
    expect(once.figures).toMatchObject({ tokens_out: 6, stop_type: 'limit', finish_reason: 'length' });
    const events: CompletionEvent[] = [];
    await fim.infillInto(body, (ev) => {
      events.push(ev);
    });
    expect(events.flatMap((e) => (e.type === 'token' ? [e.t] : [])).join('')).toBe(once.body.content);
    expect(events.at(-1)).toMatchObject({ type: 'end', tokens_out: 6 });
  });

  it("a route the engine does not serve is the engine's refusal (501 not supported)", async () => {
    const err = await fim.call({ kind: 'embeddings', body: { input: 'x' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineRejectedError);
    expect((err as EngineRejectedError).status).toBe(501);
    const bad = await embed
      .call({ kind: 'embeddings', body: { input: 'x', encoding_format: 'int8' } })
      .catch((e: unknown) => e);
    expect(bad).toMatchObject({ status: 400, errorCode: 'INVALID_PARAMS' });
  });
});
