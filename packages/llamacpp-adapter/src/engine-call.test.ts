import { describe, expect, it } from 'vitest';
import { callFigures, callRequestOf, readCallAnswer } from './engine-call.js';
import { EngineProtocolError } from './errors.js';

// Bodies as llama-server (de3ff81) answered them (captured; vectors and settings shortened).
const EMBEDDINGS =
  '{"model":"m","object":"list","usage":{"prompt_tokens":5,"total_tokens":5},"data":[{"embedding":[0.2,0.02],"index":0,"object":"embedding"}]}';
const RERANK =
  '{"model":"m","object":"list","usage":{"prompt_tokens":13,"total_tokens":13},"results":[{"index":1,"relevance_score":-0.22}]}';
const INFILL =
  '{"index":0,"content":"\\u0002\\u0002","tokens":[],"id_slot":0,"stop":true,"model":"m","tokens_predicted":5,"tokens_evaluated":14,"stop_type":"limit","tokens_cached":18,"timings":{"cache_n":3,"predicted_ms":1.5}}';

describe('engine calls (embeddings, rerank, infill)', () => {
  it('read the figures of each route: prompt tokens for embeddings and rerank, generation figures for infill', () => {
    expect(callFigures('embeddings', JSON.parse(EMBEDDINGS))).toEqual({
      tokens_out: 0,
      decode_ms: 0,
      stop_type: 'eos',
      finish_reason: 'stop',
      prompt_tokens: 5,
    });
    expect(callFigures('rerank', JSON.parse(RERANK))).toMatchObject({ tokens_out: 0, prompt_tokens: 13 });
    expect(callFigures('infill', JSON.parse(INFILL))).toEqual({
      tokens_out: 5,
      decode_ms: 1.5,
      stop_type: 'limit',
      finish_reason: 'length',
      prompt_tokens: 14,
      cached_tokens: 18,
    });
  });

  it.each([
    ['embeddings', '{"error":{"message":"x"}}'],
    ['embeddings', RERANK],
    ['rerank', EMBEDDINGS],
    ['infill', EMBEDDINGS],
    ['infill', '{"content":"x","tokens_predicted":-1,"tokens_evaluated":1}'],
  ] as const)('%s: a body of another shape is a protocol error', (kind, text) => {
    expect(() => readCallAnswer(kind, text, 'http://e')).toThrow(EngineProtocolError);
  });

  it("keeps the engine's text and parsed body as they came", () => {
    const answer = readCallAnswer('embeddings', EMBEDDINGS, 'http://e');
    expect(answer.text).toBe(EMBEDDINGS);
    expect(answer.body).toEqual(JSON.parse(EMBEDDINGS));
  });

  it('sends the body to the route of its kind as it is; an infill answer is asked for unstreamed', () => {
    expect(callRequestOf({ kind: 'embeddings', body: { input: 'x', model: 'm' } })).toEqual({
      path: '/v1/embeddings',
      body: { input: 'x', model: 'm' },
    });
    expect(callRequestOf({ kind: 'rerank', body: { query: 'q' } }).path).toBe('/v1/rerank');
    expect(callRequestOf({ kind: 'infill', body: { input_prefix: 'a', stream: true } })).toEqual({
      path: '/infill',
      body: { input_prefix: 'a', stream: false },
    });
  });
});
