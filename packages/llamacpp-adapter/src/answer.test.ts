import { describe, expect, it } from 'vitest';
import { answerFigures, answerRequestOf, readAnswer } from './answer.js';
import { EngineProtocolError } from './errors.js';

// Bodies as llama-server (de3ff81) answered them with `stream: false` (captured; model path shortened).
const CHAT =
  '{"choices":[{"finish_reason":"length","index":0,"message":{"role":"assistant","content":"::::::::"}}],"created":1795641567,"model":"m.gguf","system_fingerprint":"b1-de3ff81","object":"chat.completion","usage":{"completion_tokens":8,"prompt_tokens":9,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":0}},"id":"chatcmpl-2x6i","timings":{"cache_n":0,"prompt_n":9,"prompt_ms":6.677,"predicted_n":8,"predicted_ms":2.296}}';
const COMPLETION =
  '{"choices":[{"text":" upon upon dicembre","index":0,"logprobs":null,"finish_reason":"stop"}],"created":1795641567,"model":"m.gguf","system_fingerprint":"b1-de3ff81","object":"text_completion","usage":{"completion_tokens":3,"prompt_tokens":3,"total_tokens":6,"prompt_tokens_details":{"cached_tokens":2}},"id":"chatcmpl-Wk0h","timings":{"cache_n":2,"prompt_n":1,"prompt_ms":0.6,"predicted_n":3,"predicted_ms":1.25}}';

describe('answerFigures (performance notes: answers checked by hand)', () => {
  it("reads the figures of the engine's chat and completion answers", () => {
    expect(answerFigures(JSON.parse(CHAT))).toEqual({
      tokens_out: 8,
      decode_ms: 2.296,
      stop_type: 'limit',
      finish_reason: 'length',
      prompt_tokens: 9,
      cached_tokens: 0,
    });
    expect(answerFigures(JSON.parse(COMPLETION))).toEqual({
      tokens_out: 3,
      decode_ms: 1.25,
      stop_type: 'eos',
      finish_reason: 'stop',
      prompt_tokens: 3,
      cached_tokens: 2,
    });
  });

  it('takes the cached count from the timings when usage has no details, and decode 0 without timings', () => {
    const body = JSON.parse(CHAT) as Record<string, unknown>;
    body.usage = { completion_tokens: 8, prompt_tokens: 9 };
    body.timings = { cache_n: 4, predicted_ms: 1 };
    expect(answerFigures(body)).toMatchObject({ cached_tokens: 4, decode_ms: 1 });
    delete body.timings;
    expect(answerFigures(body)).toMatchObject({ decode_ms: 0 });
    expect(answerFigures(body)).not.toHaveProperty('cached_tokens');
  });

  it.each([
    ['not an object', []],
    ['an error body', { error: { message: 'x' } }],
    ['no choices', { usage: { completion_tokens: 1, prompt_tokens: 1 } }],
    [
      'two choices',
      {
        ...JSON.parse(CHAT),
        choices: [
          { finish_reason: 'stop', message: {} },
          { finish_reason: 'stop', message: {} },
        ],
      },
    ],
    ['an unknown finish reason', { ...JSON.parse(CHAT), choices: [{ finish_reason: 'cancelled', message: {} }] }],
    ['a choice without message or text', { ...JSON.parse(CHAT), choices: [{ finish_reason: 'stop' }] }],
    ['no usage', { ...JSON.parse(CHAT), usage: undefined }],
    ['a negative token count', { ...JSON.parse(CHAT), usage: { completion_tokens: -1, prompt_tokens: 1 } }],
    ['timings without predicted_ms', { ...JSON.parse(CHAT), timings: { cache_n: 0 } }],
  ])('refuses %s', (_, body) => {
    expect(answerFigures(body)).toBeUndefined();
  });

  it('readAnswer keeps the text as it came and throws EngineProtocolError for what is not an answer', () => {
    const a = readAnswer(CHAT, 'http://e');
    expect(a.text).toBe(CHAT);
    expect(a.body.id).toBe('chatcmpl-2x6i');
    expect(() => readAnswer('{"choices":', 'http://e')).toThrow(EngineProtocolError);
    expect(() => readAnswer('{"ok":true}', 'http://e')).toThrow(EngineProtocolError);
  });
});

describe('answerRequestOf', () => {
  it('a chat: the streamed chat body with stream false and without the usage-chunk option, same key order', () => {
    const r = answerRequestOf({
      workload: 'chat',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
      seed: 1,
      greedy: true,
      cache_prompt: true,
      sampling: { top_k: 5 },
    });
    expect(r.path).toBe('/v1/chat/completions');
    expect(JSON.stringify(r.body)).toBe(
      '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":false,"cache_prompt":true,"seed":1,"temperature":0,"top_k":5}',
    );
  });

  it("a completion: /completion's body on the OpenAI completions route, stream false", () => {
    const r = answerRequestOf({
      workload: 'completion',
      prompt: 'p',
      max_tokens: 4,
      sampling: { logprobs: true, top_logprobs: 2 },
    });
    expect(r.path).toBe('/v1/completions');
    expect(JSON.stringify(r.body)).toBe(
      '{"prompt":"p","n_predict":4,"stream":false,"cache_prompt":false,"temperature":0.8,"n_probs":2}',
    );
  });
});
