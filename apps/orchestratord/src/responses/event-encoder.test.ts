import type { SseFrame } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { ResponsesEventEncoder } from './event-encoder.js';
import { parseResponsesRequest, responsesCall } from './request-mapping.js';
import { responseFromChat, type ResponseIdentity } from './response-object.js';

const who: ResponseIdentity = {
  id: 'resp_t',
  createdAt: 100,
  model: 'tiny',
  taskId: 't',
  request: { model: 'tiny', input: 'hi' },
};
const end = (finish: 'stop' | 'length' | 'tool_calls'): SseFrame => ({
  event: 'end',
  data: {
    tokens_out: 2,
    decode_ms: 1,
    decode_time_ms: 1,
    stop_type: finish === 'length' ? 'limit' : 'eos',
    finish_reason: finish,
    prompt_tokens: 7,
    cached_tokens: 0,
  },
});

function events(frames: SseFrame[]): Array<{ type: string; data: Record<string, unknown> }> {
  const enc = new ResponsesEventEncoder(who);
  const text = frames.map((f, i) => enc.encode(i, f)).join('');
  return [...text.matchAll(/^event: ([\w.]+)\ndata: (.*)\n\n/gm)].map((m) => ({
    type: m[1]!,
    data: JSON.parse(m[2]!) as Record<string, unknown>,
  }));
}

describe('ResponsesEventEncoder', () => {
  it('streams a message item with numbered events and ends incomplete when the limit cut it', () => {
    const out = events([
      { event: 'token', data: { t: 'Hi', i: 0 } },
      { event: 'token', data: { t: ' there', i: 1 } },
      end('length'),
    ]);
    expect(out.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.incomplete',
    ]);
    expect(out.map((e) => e.data.sequence_number)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(out[6]!.data).toMatchObject({ item_id: 'msg_t', output_index: 0, content_index: 0, text: 'Hi there' });
    const response = out[9]!.data.response as Record<string, unknown>;
    expect(response).toMatchObject({
      id: 'resp_t',
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      model: 'tiny',
    });
    expect(response.output).toEqual([
      {
        id: 'msg_t',
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Hi there', annotations: [], logprobs: [] }],
      },
    ]);
    expect(response.usage).toEqual({
      input_tokens: 7,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 2,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 9,
    });
  });

  it('streams a tool call as a function_call item with argument deltas, then completed', () => {
    const out = events([
      {
        event: 'token',
        data: {
          t: '',
          i: 0,
          delta: { tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a"' } }] },
        },
      },
      { event: 'token', data: { t: '', i: 1, delta: { tool_calls: [{ index: 0, function: { arguments: ':1}' } }] } } },
      end('tool_calls'),
    ]);
    expect(out.map((e) => e.type).slice(2)).toEqual([
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(out[5]!.data).toMatchObject({ item_id: 'fc_c1', arguments: '{"a":1}' });
    expect((out.at(-1)!.data.response as { output: unknown[] }).output).toEqual([
      { id: 'fc_c1', type: 'function_call', status: 'completed', arguments: '{"a":1}', call_id: 'c1', name: 'f' },
    ]);
  });
});

describe('ResponsesEventEncoder for a stored background response', () => {
  const bg: ResponseIdentity = { ...who, stored: { background: true } };
  const started: SseFrame = { event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } };
  const types = (enc: ResponsesEventEncoder, frames: SseFrame[]) =>
    [
      ...frames
        .map((f, i) => enc.encode(i, f))
        .join('')
        .matchAll(/^event: ([\w.]+)\ndata: (.*)\n\n/gm),
    ].map((m) => ({
      type: m[1]!,
      data: JSON.parse(m[2]!) as Record<string, unknown>,
    }));

  it('opens queued with its started frame; the same frames give the same numbers, and starting_after skips what came before', () => {
    const frames: SseFrame[] = [started, { event: 'token', data: { t: 'Hi', i: 0 } }, end('stop')];
    const all = types(new ResponsesEventEncoder(bg), frames);
    expect(all.slice(0, 3).map((e) => e.type)).toEqual(['response.created', 'response.queued', 'response.in_progress']);
    expect(all[0]!.data.response).toMatchObject({ status: 'queued', background: true, store: true });
    const tail = types(new ResponsesEventEncoder(bg, { startingAfter: 4 }), frames);
    expect(tail).toEqual(all.slice(5));
  });

  it('ends cancelled or failed as it ended, with the items so far; `final` is the last event’s response', () => {
    const enc = new ResponsesEventEncoder(bg);
    const cancel: SseFrame = {
      event: 'end',
      data: { tokens_out: 1, decode_ms: 1, decode_time_ms: 1, stop_type: 'cancel', canceled: true },
    };
    const out = types(enc, [started, { event: 'token', data: { t: 'Hi', i: 0 } }, cancel]);
    expect(out.at(-1)).toMatchObject({ type: 'response.cancelled', data: { response: { status: 'cancelled' } } });
    expect(enc.final).toEqual(out.at(-1)!.data.response);
    const failing = new ResponsesEventEncoder(bg);
    const failed = types(failing, [
      started,
      { event: 'token', data: { t: 'Hi', i: 0 } },
      { event: 'error', data: { code: 'WORKER_RESET', message: 'engine lost', retriable: true } },
    ]);
    expect(failed.at(-1)).toMatchObject({
      type: 'response.failed',
      data: { response: { status: 'failed', error: { code: 'WORKER_RESET', message: 'engine lost' } } },
    });
    expect((failing.final?.output as unknown[]).length).toBe(1);
  });
});

describe('Responses mapping and answers', () => {
  it('translates instructions, message items, function calls and their outputs, tools and text.format', () => {
    const call = responsesCall(
      parseResponsesRequest({
        model: 'tiny',
        instructions: 'Be brief.',
        input: [
          { role: 'user', content: 'hi' },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Let me look.' }] },
          { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
          { type: 'function_call_output', call_id: 'c1', output: 'ok' },
        ],
        tools: [{ type: 'function', name: 'f', parameters: { type: 'object' } }],
        tool_choice: { type: 'function', name: 'f' },
        max_output_tokens: 5,
        text: { format: { type: 'json_schema', name: 'x', schema: { type: 'object' } } },
        stream: true,
      }),
      undefined,
    );
    expect(call.stream).toBe(true);
    expect(call.task).toMatchObject({
      max_tokens: 5,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'hi' }] },
        {
          role: 'assistant',
          content: [{ type: 'text', text: 'Let me look.' }],
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'ok' },
      ],
      sampling: {
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' }, strict: true } }],
        tool_choice: { type: 'function', function: { name: 'f' } },
        response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' }, strict: false } },
      },
    });
  });

  it('refuses conversation objects, background without store and non-function tools with the field named', () => {
    const parse = (body: Record<string, unknown>) => parseResponsesRequest({ model: 'tiny', input: 'hi', ...body });
    expect(() => parse({ conversation: 'conv_1' })).toThrow(/^conversation: conversation objects are not supported/);
    expect(() => parse({ background: true, store: false })).toThrow(
      /^background: a background response must be stored/,
    );
    expect(parse({ store: true, background: true, previous_response_id: 'resp_1' })).toMatchObject({
      store: true,
      background: true,
      previous_response_id: 'resp_1',
    });
    expect(() => parse({ tools: [{ type: 'file_search' }] })).toThrow(/^tools\.0\.type: /);
    expect(() => parse({ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] })).toThrow(
      /^input\.0\.content\.0\.type: /,
    );
  });

  it('puts a history (the previous response’s conversation and output) between the instructions and the input', () => {
    const call = responsesCall(
      parseResponsesRequest({ model: 'tiny', instructions: 'Be brief.', input: 'and then?' }),
      'b8c1b1b0-0000-5000-8000-000000000000',
      {
        taskId: '0f1e2d3c-0000-4000-8000-000000000000',
        history: [
          { role: 'user', content: 'hi' },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'hello' }] },
        ],
      },
    );
    expect(call.task).toMatchObject({
      task_id: '0f1e2d3c-0000-4000-8000-000000000000',
      session_id: 'b8c1b1b0-0000-5000-8000-000000000000',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'hi' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'hello' }] },
        { role: 'user', content: [{ type: 'text', text: 'and then?' }] },
      ],
    });
  });

  it('renders the engine’s chat answer as a completed response with a message and function_call items', () => {
    const r = responseFromChat(
      {
        choices: [
          {
            finish_reason: 'tool_calls',
            message: { content: 'ok', tool_calls: [{ id: 'c1', function: { name: 'f', arguments: '{}' } }] },
          },
        ],
        usage: { prompt_tokens: 3, completion_tokens: 2 },
      },
      who,
    );
    expect(r).toMatchObject({
      status: 'completed',
      incomplete_details: null,
      store: false,
      previous_response_id: null,
    });
    expect(r.output).toEqual([
      {
        id: 'msg_t',
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'ok', annotations: [], logprobs: [] }],
      },
      { id: 'fc_c1', type: 'function_call', status: 'completed', arguments: '{}', call_id: 'c1', name: 'f' },
    ]);
  });
});
