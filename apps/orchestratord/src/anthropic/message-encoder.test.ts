import type { SseFrame } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { anthropicMessage } from './message-answer.js';
import { AnthropicEventEncoder } from './message-encoder.js';
import { countTokensCall, messagesCall } from './message-mapping.js';

const end = (finish: 'stop' | 'length' | 'tool_calls', tokens = 3): SseFrame => ({
  event: 'end',
  data: {
    tokens_out: tokens,
    decode_ms: 1,
    decode_time_ms: 1,
    stop_type: finish === 'length' ? 'limit' : 'eos',
    finish_reason: finish,
    prompt_tokens: 10,
    cached_tokens: 4,
  },
});

function events(frames: SseFrame[]): Array<{ event: string; data: Record<string, unknown> }> {
  const enc = new AnthropicEventEncoder({ id: 'msg_1', model: 'tiny' });
  const text = frames.map((f, i) => enc.encode(i, f)).join('');
  return [...text.matchAll(/^event: (\w+)\ndata: (.*)\n\n/gm)].map((m) => ({
    event: m[1]!,
    data: JSON.parse(m[2]!) as Record<string, unknown>,
  }));
}

describe('AnthropicEventEncoder', () => {
  it('writes a text message as Anthropic streams it: start and ping, one block, deltas, stop, message_delta with usage, message_stop', () => {
    const out = events([
      { event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } },
      { event: 'token', data: { t: 'Hel', i: 0 } },
      { event: 'token', data: { t: 'lo', i: 1 } },
      end('length'),
    ]);
    expect(out.map((e) => e.event)).toEqual([
      'message_start',
      'ping',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(out[0]!.data).toEqual({
      type: 'message_start',
      message: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        content: [],
        model: 'tiny',
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 0, output_tokens: 0 },
      },
    });
    expect(out[2]!.data).toEqual({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
    expect(out[4]!.data).toEqual({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'lo' } });
    expect(out[6]!.data).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'max_tokens', stop_sequence: null },
      usage: { cache_read_input_tokens: 4, input_tokens: 6, output_tokens: 3 },
    });
  });

  it('turns streamed tool-call deltas into a tool_use block with input_json_delta pieces and stop_reason tool_use', () => {
    const out = events([
      {
        event: 'token',
        data: {
          t: '',
          i: 0,
          delta: {
            tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{' } }],
          },
        },
      },
      {
        event: 'token',
        data: { t: '', i: 1, delta: { tool_calls: [{ index: 0, function: { arguments: '"city":"Paris"}' } }] } },
      },
      end('tool_calls'),
    ]);
    expect(out.map((e) => e.event)).toEqual([
      'message_start',
      'ping',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(out[2]!.data.content_block).toEqual({ type: 'tool_use', id: 'c1', name: 'get_weather', input: {} });
    expect(
      out
        .slice(3, 5)
        .map((e) => (e.data.delta as { partial_json: string }).partial_json)
        .join(''),
    ).toBe('{"city":"Paris"}');
    expect((out[6]!.data.delta as { stop_reason: string }).stop_reason).toBe('tool_use');
  });

  it('an error after the start is one error event in Anthropic’s shape', () => {
    const enc = new AnthropicEventEncoder({ id: 'msg_1', model: 'tiny' });
    enc.encode(0, { event: 'token', data: { t: 'a', i: 0 } });
    expect(
      enc.encode(1, { event: 'error', data: { code: 'WORKER_RESET', message: 'engine died', retriable: true } }),
    ).toBe('event: error\ndata: {"type":"error","error":{"type":"api_error","message":"engine died"}}\n\n');
  });
});

describe('anthropicMessage', () => {
  it('renders the engine’s chat answer: text and tool_use blocks, stop_reason, usage with the cached tokens apart', () => {
    const body = {
      choices: [
        {
          finish_reason: 'tool_calls',
          message: {
            content: 'Let me look.',
            tool_calls: [
              { id: 'c1', function: { name: 'f', arguments: '{"a":1}' } },
              { id: 'c2', function: { name: 'g', arguments: 'nope' } },
            ],
          },
        },
      ],
      usage: { prompt_tokens: 12, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 2 } },
    };
    expect(anthropicMessage(body, { id: 'msg_1', model: 'tiny' })).toEqual({
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      content: [
        { type: 'text', text: 'Let me look.' },
        { type: 'tool_use', id: 'c1', name: 'f', input: { a: 1 } },
        { type: 'tool_use', id: 'c2', name: 'g', input: {} },
      ],
      model: 'tiny',
      stop_reason: 'tool_use',
      stop_sequence: null,
      usage: { cache_read_input_tokens: 2, input_tokens: 10, output_tokens: 5 },
    });
  });
});

describe('message mapping', () => {
  it('translates system, text, tool_use, tool_result and tools as the engine’s own route does', () => {
    const call = messagesCall(
      {
        model: 'tiny',
        max_tokens: 9,
        system: [
          { type: 'text', text: 'Be ' },
          { type: 'text', text: 'brief.' },
        ],
        stop_sequences: ['END'],
        temperature: 0,
        tools: [{ name: 'f', input_schema: { type: 'object' } }],
        tool_choice: { type: 'tool', name: 'f' },
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'c1', name: 'f', input: { a: 1 } }] },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'c1', content: [{ type: 'text', text: 'ok' }] },
              { type: 'text', text: 'and?' },
            ],
          },
        ],
      },
      undefined,
    );
    expect(call.stream).toBe(false);
    expect(call.task).toMatchObject({
      workload: 'chat',
      max_tokens: 9,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hi' },
        {
          role: 'assistant',
          content: '',
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
        },
        { role: 'user', content: [{ type: 'text', text: 'and?' }] },
        { role: 'tool', tool_call_id: 'c1', content: 'ok' },
      ],
      sampling: {
        temperature: 0,
        stop: ['END'],
        tools: [{ type: 'function', function: { name: 'f', description: '', parameters: { type: 'object' } } }],
        tool_choice: { type: 'function', function: { name: 'f' } },
      },
    });
    expect(
      countTokensCall({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }] }, undefined).task.max_tokens,
    ).toBe(1);
  });

  it('refuses what it cannot honour with a 400 naming the field', () => {
    const base = { model: 'tiny', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] };
    expect(() => messagesCall({ ...base, max_tokens: undefined }, undefined)).toThrow(/^max_tokens: /);
    expect(() => messagesCall({ ...base, thinking: { type: 'enabled', budget_tokens: 100 } }, undefined)).toThrow(
      /thinking/,
    );
    expect(() =>
      messagesCall({ ...base, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }, undefined),
    ).toThrow(/^messages\.0\.content/);
    expect(() => messagesCall({ ...base, tool_choice: { type: 'tool', name: 'nope' } }, undefined)).toThrow(
      /^tool_choice\.name: /,
    );
  });
});
