import { describe, expect, it } from 'vitest';
import { answerText } from '../openai/answer-response.js';
import { endOf, parseAnswerLine } from './answer-attempt.js';
import { UpstreamStreamError } from './upstream-errors.js';

const RESULT = {
  type: 'result',
  tokens_out: 3,
  decode_ms: 1.5,
  stop_type: 'limit',
  finish_reason: 'length',
  prompt_tokens: 4,
  cached_tokens: 2,
  engine_version: 'b1',
  pool_id: 'p',
  node_id: 'n',
  body: {
    choices: [{ text: 'abc', index: 0, logprobs: null, finish_reason: 'length' }],
    created: 1,
    model: 'engine.gguf',
    object: 'text_completion',
    id: 'chatcmpl-e',
    timings: { predicted_ms: 1.5 },
  },
};

describe('parseAnswerLine', () => {
  it('reads a result and an error event', () => {
    expect(parseAnswerLine(`${JSON.stringify(RESULT)}\n`)).toMatchObject({
      type: 'result',
      tokens_out: 3,
      body: { object: 'text_completion' },
    });
    expect(
      parseAnswerLine('{"type":"error","code":"INVALID_PARAMS","message":"too long","retriable":false}\n'),
    ).toMatchObject({ type: 'error', code: 'INVALID_PARAMS' });
  });

  it.each([
    ['nothing', ''],
    ['two lines', `${JSON.stringify(RESULT)}\n${JSON.stringify(RESULT)}\n`],
    ['a token event', '{"type":"token","t":"a","i":0}\n'],
    [
      'an end event',
      '{"type":"end","tokens_out":1,"decode_ms":1,"stop_type":"eos","engine_version":"b","pool_id":"p","node_id":"n"}\n',
    ],
    ['a result without its body', `${JSON.stringify({ ...RESULT, body: undefined })}\n`],
    ['not JSON', '{"type":"res'],
  ])('refuses %s as a broken node stream', (_, text) => {
    expect(() => parseAnswerLine(text)).toThrow(UpstreamStreamError);
  });

  it('endOf gives the end figures a streamed dispatch would have ended with', () => {
    const ev = parseAnswerLine(JSON.stringify(RESULT));
    if (ev.type !== 'result') throw new Error('expected a result');
    expect(endOf(ev)).toEqual({
      type: 'end',
      tokens_out: 3,
      decode_ms: 1.5,
      stop_type: 'limit',
      finish_reason: 'length',
      prompt_tokens: 4,
      cached_tokens: 2,
      engine_version: 'b1',
      pool_id: 'p',
      node_id: 'n',
    });
  });
});

describe('answerText (performance notes: engine answer passed through)', () => {
  it('replaces id, created and model in place and keeps every other member and the key order', () => {
    const body = structuredClone(RESULT.body) as Record<string, unknown>;
    const text = answerText(body, { kind: 'completion', id: 'cmpl-t', created: 99, model: 'tiny' });
    expect(text).toBe(
      '{"choices":[{"text":"abc","index":0,"logprobs":null,"finish_reason":"length"}],"created":99,"model":"tiny","object":"text_completion","id":"cmpl-t","timings":{"predicted_ms":1.5}}',
    );
  });
});
