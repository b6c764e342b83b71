import { describe, expect, it } from 'vitest';
import { DEFAULT_TEMPERATURE, toChatBody, toCompletionBody } from './completion-body.js';

describe('toCompletionBody', () => {
  it('maps a greedy seeded dispatch with a fixed key order', () => {
    const body = toCompletionBody({
      prompt: 'Once upon a time',
      max_tokens: 16,
      seed: 42,
      greedy: true,
      temperature: 1.3,
    });
    expect(JSON.stringify(body)).toBe(
      '{"prompt":"Once upon a time","n_predict":16,"stream":true,"cache_prompt":false,"seed":42,"temperature":0}',
    );
  });

  it('omits seed when absent and uses the given or default temperature', () => {
    expect(toCompletionBody({ prompt: 'p', max_tokens: 1 })).toEqual({
      prompt: 'p',
      n_predict: 1,
      stream: true,
      cache_prompt: false,
      temperature: DEFAULT_TEMPERATURE,
    });
    expect(toCompletionBody({ prompt: 'p', max_tokens: 1, greedy: false, temperature: 0.2 }).temperature).toBe(0.2);
    expect('seed' in toCompletionBody({ prompt: 'p', max_tokens: 1 })).toBe(false);
  });
});

describe('toCompletionBody with sampling', () => {
  it('appends the sampling fields after the six base fields, native names, fixed order', () => {
    const body = toCompletionBody({
      prompt: 'p',
      max_tokens: 8,
      seed: 1,
      cache_prompt: true,
      sampling: {
        stop: ['\n'],
        logit_bias: { '15043': -100 },
        repeat_penalty: 1.1,
        frequency_penalty: 0.5,
        presence_penalty: 0.25,
        min_p: 0.05,
        top_k: 40,
        top_p: 0.9,
        temperature: 0.3,
      },
    });
    expect(JSON.stringify(body)).toBe(
      '{"prompt":"p","n_predict":8,"stream":true,"cache_prompt":true,"seed":1,"temperature":0.3,"top_p":0.9,"top_k":40,"min_p":0.05,' +
        '"presence_penalty":0.25,"frequency_penalty":0.5,"repeat_penalty":1.1,"logit_bias":{"15043":-100},"stop":["\\n"]}',
    );
  });

  it('greedy beats sampling.temperature, which beats the older temperature field', () => {
    expect(
      toCompletionBody({ prompt: 'p', max_tokens: 1, greedy: true, sampling: { temperature: 1 } }).temperature,
    ).toBe(0);
    expect(
      toCompletionBody({ prompt: 'p', max_tokens: 1, temperature: 0.2, sampling: { temperature: 1 } }).temperature,
    ).toBe(1);
  });

  it('response_format becomes json_schema; logprobs become n_probs; tools are not sent', () => {
    const schema = { type: 'object', properties: { a: { type: 'integer' } } };
    expect(
      toCompletionBody({
        prompt: 'p',
        max_tokens: 1,
        sampling: { response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } },
      }).json_schema,
    ).toEqual(schema);
    expect(
      toCompletionBody({ prompt: 'p', max_tokens: 1, sampling: { response_format: { type: 'json_object' } } })
        .json_schema,
    ).toEqual({});
    expect(
      toCompletionBody({ prompt: 'p', max_tokens: 1, sampling: { response_format: { type: 'json_object', schema } } })
        .json_schema,
    ).toEqual(schema);
    expect(
      'json_schema' in
        toCompletionBody({ prompt: 'p', max_tokens: 1, sampling: { response_format: { type: 'text' } } }),
    ).toBe(false);
    expect(toCompletionBody({ prompt: 'p', max_tokens: 1, sampling: { logprobs: true } }).n_probs).toBe(1);
    expect(
      toCompletionBody({ prompt: 'p', max_tokens: 1, sampling: { logprobs: true, top_logprobs: 5 } }).n_probs,
    ).toBe(5);
    const withTools = toCompletionBody({
      prompt: 'p',
      max_tokens: 1,
      sampling: { tools: [{ type: 'function' }], tool_choice: 'auto', logprobs: false },
    });
    expect(Object.keys(withTools)).toEqual(['prompt', 'n_predict', 'stream', 'cache_prompt', 'temperature']);
  });
});

describe('toChatBody', () => {
  const messages = [{ role: 'user' as const, content: 'hi' }];

  it('asks for the usage chunk and keeps a fixed key order', () => {
    expect(JSON.stringify(toChatBody({ messages, max_tokens: 4, seed: 7, greedy: true }))).toBe(
      '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true},"cache_prompt":false,"seed":7,"temperature":0}',
    );
  });

  it('passes every sampling field under its OpenAI name, llama.cpp extras included', () => {
    const sampling = {
      temperature: 0.5,
      top_p: 0.9,
      top_k: 20,
      min_p: 0.1,
      presence_penalty: 0.1,
      frequency_penalty: 0.2,
      repeat_penalty: 1.2,
      logit_bias: { '2': 5 },
      stop: 'END',
      response_format: { type: 'json_object' as const },
      logprobs: true,
      top_logprobs: 2,
      tools: [{ type: 'function', function: { name: 'f' } }],
      tool_choice: 'auto' as const,
    };
    const body = toChatBody({ messages, max_tokens: 4, cache_prompt: true, sampling });
    const { temperature, ...rest } = sampling;
    expect(body).toEqual({
      messages,
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
      cache_prompt: true,
      temperature,
      ...rest,
    });
  });

  it('sends a named tool_choice as required over that one tool (the engine reads only the strings)', () => {
    const messages = [{ role: 'user' as const, content: 'hi' }];
    const tools = [
      { type: 'function', function: { name: 'f' } },
      { type: 'function', function: { name: 'g' } },
    ];
    const body = toChatBody({
      messages,
      max_tokens: 4,
      sampling: { tools, tool_choice: { type: 'function', function: { name: 'g' } } },
    });
    expect(body.tools).toEqual([{ type: 'function', function: { name: 'g' } }]);
    expect(body.tool_choice).toBe('required');
    expect(toChatBody({ messages, max_tokens: 4, sampling: { tools, tool_choice: 'auto' } })).toMatchObject({
      tools,
      tool_choice: 'auto',
    });
  });
});
