import type { EndEvent, ErrorEvent, SseFrame, TokenEvent } from '@llama-orch/contracts';
import { openAiErrorBody } from '../openai/openai-errors.js';
import type { FrameEncoder } from '../streams/frame-encoder.js';
import {
  functionCallItem,
  messageItem,
  outputText,
  reasoningItem,
  responseEnvelope,
  responsesUsage,
  statusOf,
  type ResponseIdentity,
  type Status,
} from './response-object.js';

interface ToolCallPiece {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

/** One output item being streamed: its position, id and what it has said so far. */
interface OpenItem {
  readonly outputIndex: number;
  readonly kind: 'message' | 'reasoning' | 'function_call';
  readonly id: string;
  text: string;
  readonly callId?: string;
  readonly name?: string;
}

/**
 * The Responses door's {@link FrameEncoder}: a chat task's token records as OpenAI's Responses
 * streaming events (`event: <type>` + `data: <json>`, each with a `sequence_number`):
 * `response.created` and `response.in_progress` with the first record; per output item
 * `response.output_item.added`, its deltas (`response.output_text.delta` after
 * `response.content_part.added`, `response.reasoning_text.delta`,
 * `response.function_call_arguments.delta` with the argument pieces as the engine streamed them),
 * and when the next item opens or the task ends its `…done` events (`output_text.done`,
 * `content_part.done`, `function_call_arguments.done`, `output_item.done`); at the end
 * `response.completed` (or `response.incomplete` when `max_output_tokens` cut it) with the whole
 * response and usage. A failure after the first event is one `error` event (before it, the route
 * answers with the status).
 *
 * A stored response (`who.stored`) ends as it ended: `response.failed` (status `failed`, `error`)
 * for an error frame, `response.cancelled` for a cancel. A background one opens with its `started`
 * frame: `response.created` and `response.queued` (status `queued`), then `response.in_progress`
 * with the first token. The events depend only on the token and terminal frames, so the same frames
 * encode to the same events with the same numbers on any replica, at any time: a reader that
 * reconnects with `startingAfter` gets the events after that `sequence_number` (the earlier ones are
 * still encoded, to know the items, but not written).
 */
export class ResponsesEventEncoder implements FrameEncoder {
  readonly verbose = false;
  readonly #who: ResponseIdentity;
  readonly #startingAfter: number;
  #seq = 0;
  #created = false;
  #started = false;
  readonly #items: OpenItem[] = [];
  #open: OpenItem | undefined;
  readonly #calls = new Map<number, OpenItem>();
  #final: Record<string, unknown> | undefined;

  constructor(who: ResponseIdentity, options: { startingAfter?: number | undefined } = {}) {
    this.#who = who;
    this.#startingAfter = options.startingAfter ?? -1;
  }

  /** The response the terminal frame made (what `response.completed` or its kin carried); undefined before it. */
  get final(): Record<string, unknown> | undefined {
    return this.#final;
  }

  /** The response as it stands (`status` given), with the items so far: what a poll shows while it runs. */
  snapshot(status: Status): Record<string, unknown> {
    const output = this.#items.map((item) => this.#itemBody(item, item === this.#open ? 'in_progress' : 'completed'));
    return responseEnvelope(this.#who, status, output, null);
  }

  encode(_id: number, frame: SseFrame): string {
    switch (frame.event) {
      case 'started':
        return this.#who.stored?.background === true ? this.#queued() : '';
      case 'token':
        return this.#start() + this.#token(frame.data);
      case 'end':
        return this.#start() + this.#end(frame.data);
      case 'error': {
        if (this.#who.stored !== undefined) return this.#start() + this.#failed(frame.data);
        const { error } = openAiErrorBody(frame.data);
        return this.#event('error', { code: error.code, message: error.message, param: error.param });
      }
      default:
        return '';
    }
  }

  #event(type: string, data: Record<string, unknown>): string {
    const seq = this.#seq++;
    if (seq <= this.#startingAfter) return '';
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq, ...data })}\n\n`;
  }

  #queued(): string {
    this.#created = true;
    const response = responseEnvelope(this.#who, 'queued', [], null);
    return this.#event('response.created', { response }) + this.#event('response.queued', { response });
  }

  #start(): string {
    if (this.#started) return '';
    this.#started = true;
    const response = responseEnvelope(this.#who, 'in_progress', [], null);
    const created = this.#created ? '' : this.#event('response.created', { response });
    return created + this.#event('response.in_progress', { response });
  }

  /** Opens an item (closing the one open before it: items stream one after the other). */
  #openItem(kind: OpenItem['kind'], id: string, extra: { callId?: string; name?: string } = {}): [OpenItem, string] {
    let out = this.#closeOpen();
    const item: OpenItem = { outputIndex: this.#items.length, kind, id, text: '', ...extra };
    this.#items.push(item);
    this.#open = item;
    out += this.#event('response.output_item.added', {
      output_index: item.outputIndex,
      item: this.#itemBody(item, 'in_progress', true),
    });
    if (kind === 'message')
      out += this.#event('response.content_part.added', {
        item_id: id,
        output_index: item.outputIndex,
        content_index: 0,
        part: outputText(''),
      });
    return [item, out];
  }

  #itemBody(item: OpenItem, status: 'in_progress' | 'completed', empty = false): Record<string, unknown> {
    if (item.kind === 'message') return messageItem(item.id, status, empty ? undefined : item.text);
    if (item.kind === 'reasoning') return reasoningItem(item.id, empty ? undefined : item.text, status);
    return functionCallItem(item.callId ?? '', item.name ?? '', empty ? '' : item.text, status);
  }

  #closeOpen(): string {
    const item = this.#open;
    if (item === undefined) return '';
    this.#open = undefined;
    const at = { item_id: item.id, output_index: item.outputIndex };
    let out = '';
    if (item.kind === 'message') {
      out += this.#event('response.output_text.done', { ...at, content_index: 0, text: item.text, logprobs: [] });
      out += this.#event('response.content_part.done', { ...at, content_index: 0, part: outputText(item.text) });
    } else if (item.kind === 'reasoning') {
      out += this.#event('response.reasoning_text.done', { ...at, content_index: 0, text: item.text });
    } else {
      out += this.#event('response.function_call_arguments.done', { ...at, arguments: item.text });
    }
    return (
      out +
      this.#event('response.output_item.done', {
        output_index: item.outputIndex,
        item: this.#itemBody(item, 'completed'),
      })
    );
  }

  #token(tok: TokenEvent): string {
    let out = '';
    const reasoning = tok.delta?.reasoning_content;
    if (typeof reasoning === 'string' && reasoning !== '') {
      let item = this.#open?.kind === 'reasoning' ? this.#open : undefined;
      if (item === undefined) [item, out] = this.#openItem('reasoning', `rs_${this.#who.taskId}`);
      item.text += reasoning;
      out += this.#event('response.reasoning_text.delta', {
        item_id: item.id,
        output_index: item.outputIndex,
        content_index: 0,
        delta: reasoning,
      });
    }
    if (tok.t !== '') {
      let item = this.#open?.kind === 'message' ? this.#open : undefined;
      if (item === undefined) {
        let head: string;
        [item, head] = this.#openItem('message', `msg_${this.#who.taskId}`);
        out += head;
      }
      item.text += tok.t;
      out += this.#event('response.output_text.delta', {
        item_id: item.id,
        output_index: item.outputIndex,
        content_index: 0,
        delta: tok.t,
        logprobs: [],
      });
    }
    const calls = tok.delta?.tool_calls;
    if (Array.isArray(calls)) {
      for (const call of calls as ToolCallPiece[]) {
        const key = call.index ?? 0;
        let item = this.#calls.get(key);
        if (item === undefined) {
          let head: string;
          const callId = call.id ?? '';
          [item, head] = this.#openItem('function_call', `fc_${callId}`, { callId, name: call.function?.name ?? '' });
          this.#calls.set(key, item);
          out += head;
        }
        const args = call.function?.arguments;
        if (typeof args === 'string' && args !== '') {
          item.text += args;
          out += this.#event('response.function_call_arguments.delta', {
            item_id: item.id,
            output_index: item.outputIndex,
            delta: args,
          });
        }
      }
    }
    return out;
  }

  #end(end: EndEvent): string {
    let out = this.#closeOpen();
    const cancelled = end.canceled === true && this.#who.stored !== undefined;
    const status = cancelled
      ? 'cancelled'
      : statusOf(end.finish_reason ?? (end.stop_type === 'limit' ? 'length' : 'stop'));
    const output = this.#items.map((item) => this.#itemBody(item, 'completed'));
    const usage = responsesUsage(end.prompt_tokens ?? 0, end.cached_tokens ?? 0, end.tokens_out);
    const response = responseEnvelope(this.#who, status, output, usage);
    this.#final = response;
    const type = cancelled
      ? 'response.cancelled'
      : status === 'incomplete'
        ? 'response.incomplete'
        : 'response.completed';
    out += this.#event(type, { response });
    return out;
  }

  /** A stored response's failure: the items so far, the error in OpenAI's words. */
  #failed(err: ErrorEvent): string {
    let out = this.#closeOpen();
    const { error } = openAiErrorBody(err);
    const output = this.#items.map((item) => this.#itemBody(item, 'completed'));
    const response = responseEnvelope(this.#who, 'failed', output, null, {
      code: error.code ?? 'server_error',
      message: error.message,
    });
    this.#final = response;
    out += this.#event('response.failed', { response });
    return out;
  }
}
