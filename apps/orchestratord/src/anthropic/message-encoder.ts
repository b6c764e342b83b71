import type { EndEvent, SseFrame, TokenEvent } from '@llama-orch/contracts';
import type { FrameEncoder } from '../streams/frame-encoder.js';
import { anthropicErrorBody } from './anthropic-errors.js';
import { anthropicUsage, stopReasonOf } from './message-answer.js';

/** Who the streamed message is: `msg_<task id>` and the model name asked for. */
export interface MessageIdentity {
  readonly id: string;
  readonly model: string;
}

const event = (name: string, data: unknown): string => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

interface ToolCallPiece {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

/**
 * The Anthropic door's {@link FrameEncoder}: a chat task's token records as Anthropic's streaming
 * events, as llama-server's own `/v1/messages` writes them (tools/server/server-task.cpp), so a
 * stream through the door reads like the engine's: `message_start` (and a `ping`) with the first
 * record, a `content_block_start` when a block opens (text; a thinking block for
 * `reasoning_content`; a `tool_use` block, with its id and name, for each tool call of the
 * record's `delta.tool_calls`), `content_block_delta`s (`text_delta`, `thinking_delta`,
 * `input_json_delta` with the argument pieces as the engine streamed them), and at the task's end
 * the open blocks' `content_block_stop`s, `message_delta` (`stop_reason`, usage) and
 * `message_stop`. The usage of `message_start` is zero (the prompt's token count arrives with the
 * end); `message_delta` carries the full usage. A failure after the first event is one `error`
 * event in Anthropic's shape (before it, the route answers with the status).
 */
export class AnthropicEventEncoder implements FrameEncoder {
  readonly verbose = false;
  readonly #who: MessageIdentity;
  #started = false;
  /** Blocks opened so far, in order; the index of each is its position. */
  #blocks = 0;
  #thinking: number | undefined;
  #text: number | undefined;
  readonly #tools = new Map<number, number>();

  constructor(who: MessageIdentity) {
    this.#who = who;
  }

  encode(_id: number, frame: SseFrame): string {
    switch (frame.event) {
      case 'token':
        return this.#start() + this.#token(frame.data);
      case 'end':
        return this.#start() + this.#end(frame.data);
      case 'error':
        return event('error', anthropicErrorBody(frame.data));
      default:
        return '';
    }
  }

  #start(): string {
    if (this.#started) return '';
    this.#started = true;
    const message = {
      id: this.#who.id,
      type: 'message',
      role: 'assistant',
      content: [],
      model: this.#who.model,
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0 },
    };
    return event('message_start', { type: 'message_start', message }) + event('ping', { type: 'ping' });
  }

  #open(block: Record<string, unknown>): [number, string] {
    const index = this.#blocks++;
    return [index, event('content_block_start', { type: 'content_block_start', index, content_block: block })];
  }

  #delta(index: number, delta: Record<string, unknown>): string {
    return event('content_block_delta', { type: 'content_block_delta', index, delta });
  }

  #token(tok: TokenEvent): string {
    let out = '';
    const reasoning = tok.delta?.reasoning_content;
    if (typeof reasoning === 'string' && reasoning !== '') {
      if (this.#thinking === undefined) [this.#thinking, out] = this.#open({ type: 'thinking', thinking: '' });
      out += this.#delta(this.#thinking, { type: 'thinking_delta', thinking: reasoning });
    }
    if (tok.t !== '') {
      if (this.#text === undefined) {
        let head: string;
        [this.#text, head] = this.#open({ type: 'text', text: '' });
        out += head;
      }
      out += this.#delta(this.#text, { type: 'text_delta', text: tok.t });
    }
    const calls = tok.delta?.tool_calls;
    if (Array.isArray(calls)) {
      for (const call of calls as ToolCallPiece[]) {
        const key = call.index ?? 0;
        let index = this.#tools.get(key);
        if (index === undefined) {
          let head: string;
          [index, head] = this.#open({
            type: 'tool_use',
            id: call.id ?? '',
            name: call.function?.name ?? '',
            input: {},
          });
          this.#tools.set(key, index);
          out += head;
        }
        const args = call.function?.arguments;
        if (typeof args === 'string' && args !== '')
          out += this.#delta(index, { type: 'input_json_delta', partial_json: args });
      }
    }
    return out;
  }

  #end(end: EndEvent): string {
    let out = '';
    for (let index = 0; index < this.#blocks; index++) {
      if (index === this.#thinking) out += this.#delta(index, { type: 'signature_delta', signature: '' });
      out += event('content_block_stop', { type: 'content_block_stop', index });
    }
    const usage = anthropicUsage(end.prompt_tokens ?? 0, end.cached_tokens ?? 0, end.tokens_out);
    out += event('message_delta', {
      type: 'message_delta',
      delta: {
        stop_reason: stopReasonOf(end.finish_reason ?? (end.stop_type === 'limit' ? 'length' : 'stop')),
        stop_sequence: null,
      },
      usage,
    });
    return out + event('message_stop', { type: 'message_stop' });
  }
}
