import { describe, expect, it } from 'vitest';
import { DispatchResultEventSchema } from '@llama-orch/contracts';
import { readAnswer } from '@llama-orch/llamacpp-adapter';
import { resultLine } from './answer-dispatch.js';

const META = { engine_version: 'b1-de3ff81', pool_id: 'p1', node_id: 'n1' };
const BODY =
  '{"choices":[{"finish_reason":"tool_calls","index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\\"a\\":\\"x\\\\ny\\"}"}}]}}],"object":"chat.completion","usage":{"completion_tokens":5,"prompt_tokens":7,"total_tokens":12},"id":"chatcmpl-x","timings":{"predicted_ms":3.5}}';

describe('resultLine (performance notes: engine answer spliced)', () => {
  it("is one NDJSON line with the figures first and the engine's bytes as the body", () => {
    const line = resultLine(readAnswer(BODY, 'http://e'), META);
    expect(line.endsWith(`,"body":${BODY}}\n`)).toBe(true);
    expect(line.indexOf('\n')).toBe(line.length - 1);
    const ev = DispatchResultEventSchema.parse(JSON.parse(line));
    expect(ev).toMatchObject({
      type: 'result',
      tokens_out: 5,
      decode_ms: 3.5,
      stop_type: 'eos',
      finish_reason: 'tool_calls',
      prompt_tokens: 7,
      ...META,
    });
    expect(ev).not.toHaveProperty('cached_tokens');
    expect(ev.body).toEqual(JSON.parse(BODY));
  });

  it('a body with line breaks (pretty-printed) is serialised again, so the line stays one line', () => {
    const pretty = JSON.stringify(JSON.parse(BODY), null, 2);
    const line = resultLine(readAnswer(pretty, 'http://e'), META);
    expect(line.indexOf('\n')).toBe(line.length - 1);
    expect(DispatchResultEventSchema.parse(JSON.parse(line)).body).toEqual(JSON.parse(BODY));
  });
});
