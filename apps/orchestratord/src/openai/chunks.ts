import type { EndEvent, TokenEvent, Usage } from '@llama-orch/contracts';

/**
 * A task's frames as OpenAI objects, shaped as llama-server's own /v1 routes shape them
 * (reference §4.3/4.4): a chat stream opens with a role delta (`content: null`), then one chunk
 * per content piece, a finish chunk (`delta: {}` / `text: ''` with `finish_reason`), with
 * `stream_options.include_usage` a `choices: []` chunk carrying `usage`, then `data: [DONE]`.
 * Non-streaming answers are one body assembled from the same frames.
 */

export type FinishReason = 'stop' | 'length' | 'tool_calls';

export interface ResponseIdentity {
  readonly kind: 'chat' | 'completion';
  /** `chatcmpl-…` / `cmpl-…`. */
  readonly id: string;
  /** Unix seconds. */
  readonly created: number;
  /** The model name as requested. */
  readonly model: string;
}

/** OpenAI's reason: the node's own when it sent one, else from the engine's stop type. */
export function finishReason(end: EndEvent): FinishReason {
  if (end.finish_reason !== undefined) return end.finish_reason;
  return end.stop_type === 'limit' ? 'length' : 'stop';
}

export function usageOf(end: EndEvent): Usage {
  const prompt = end.prompt_tokens ?? 0;
  return {
    prompt_tokens: prompt,
    completion_tokens: end.tokens_out,
    total_tokens: prompt + end.tokens_out,
    prompt_tokens_details: { cached_tokens: end.cached_tokens ?? 0 },
  };
}

/** A chat choice's `logprobs`: OpenAI's `{content: [...]}`, whatever list form the engine sent. */
function chatLogprobs(lp: unknown): unknown {
  return Array.isArray(lp) ? { content: lp } : lp;
}

const sse = (obj: unknown): string => `data: ${JSON.stringify(obj)}\n\n`;
export const DONE = 'data: [DONE]\n\n';

/** What follows a plain piece's JSON string in its chunk, per kind (see {@link ChunkRenderer}'s `#plainHead`). */
const PLAIN_TAIL = {
  chat: '},"finish_reason":null}]}\n\n',
  completion: ',"logprobs":null,"finish_reason":null}]}\n\n',
} as const;

/** Renders one streamed response, chunk by chunk (each returned string is one `data:` event). */
export class ChunkRenderer {
  readonly #who: ResponseIdentity;
  readonly #includeUsage: boolean;
  #fingerprint: string | undefined;
  #opened = false;
  /**
   * Everything of a plain content chunk before the piece's JSON string (`data: {"id":…,"choices":
   * [{"index":0,"delta":{"content":`), built once the fingerprint is known: almost every chunk of a
   * stream is a plain piece, and building and serialising its envelope per token was most of the
   * door's own work per token. The bytes are exactly those of the general path (chunks.test.ts).
   */
  #plainHead: string | undefined;

  constructor(who: ResponseIdentity, includeUsage: boolean) {
    this.#who = who;
    this.#includeUsage = includeUsage;
  }

  #chunk(choices: unknown[], usage?: Usage): string {
    const w = this.#who;
    const obj: Record<string, unknown> = {
      id: w.id,
      object: w.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion',
      created: w.created,
      model: w.model,
    };
    if (this.#fingerprint !== undefined) obj.system_fingerprint = this.#fingerprint;
    obj.choices = choices;
    if (usage !== undefined) obj.usage = usage;
    return sse(obj);
  }

  /** The chat stream's first chunk (role delta); '' for completions. Once. */
  open(fingerprint: string | undefined): string {
    if (this.#opened) return '';
    this.#opened = true;
    this.#fingerprint = fingerprint;
    this.#plainHead = undefined;
    if (this.#who.kind !== 'chat') return '';
    return this.#chunk([{ index: 0, delta: { role: 'assistant', content: null }, finish_reason: null }]);
  }

  /** One content piece; '' for a piece with nothing to say (empty text, no other delta fields). */
  token(tok: TokenEvent): string {
    if (tok.t !== '' && tok.delta === undefined && tok.logprobs === undefined) return this.#plainPiece(tok.t);
    if (this.#who.kind === 'chat') {
      if (tok.t === '' && tok.delta === undefined && tok.logprobs === undefined) return '';
      const delta: Record<string, unknown> = tok.t === '' ? {} : { content: tok.t };
      if (tok.delta !== undefined) Object.assign(delta, tok.delta);
      const choice: Record<string, unknown> = { index: 0, delta, finish_reason: null };
      if (tok.logprobs !== undefined) choice.logprobs = chatLogprobs(tok.logprobs);
      return this.#chunk([choice]);
    }
    if (tok.t === '' && tok.logprobs === undefined) return '';
    return this.#chunk([{ index: 0, text: tok.t, logprobs: tok.logprobs ?? null, finish_reason: null }]);
  }

  /** A piece of text and nothing else: the cached head, the piece as a JSON string, the fixed tail. */
  #plainPiece(text: string): string {
    if (this.#plainHead === undefined) {
      const envelope = this.#chunk([]);
      // `data: {…,"choices":[]}\n\n` → `data: {…,"choices":[` + the choice's opening.
      const open = envelope.slice(0, envelope.length - '}\n\n'.length - ']'.length);
      this.#plainHead = open + (this.#who.kind === 'chat' ? '{"index":0,"delta":{"content":' : '{"index":0,"text":');
    }
    return this.#plainHead + JSON.stringify(text) + PLAIN_TAIL[this.#who.kind];
  }

  /** Finish chunk, usage chunk (when asked for) and `[DONE]`. */
  end(end: EndEvent): string {
    this.#fingerprint ??= end.engine_version;
    const reason = finishReason(end);
    let out =
      this.#who.kind === 'chat'
        ? this.#chunk([{ index: 0, delta: {}, finish_reason: reason }])
        : this.#chunk([{ index: 0, text: '', logprobs: null, finish_reason: reason }]);
    if (this.#includeUsage) out += this.#chunk([], usageOf(end));
    return out + DONE;
  }
}

/** An error after the stream started: one last `data:` event; the response ends after it. */
export function errorChunk(body: unknown): string {
  return sse(body);
}

/** Adds a chat delta's non-content fields to the message: strings concatenate, tool calls merge by index. */
function mergeDelta(message: Record<string, unknown>, delta: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(delta)) {
    if (k === 'role' || k === 'content') continue;
    if (k === 'tool_calls' && Array.isArray(v)) {
      const calls = (message.tool_calls ??= []) as Record<string, unknown>[];
      for (const part of v as Record<string, unknown>[]) {
        const index = typeof part.index === 'number' ? part.index : calls.length;
        const call = (calls[index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
        if (typeof part.id === 'string') call.id = part.id;
        if (typeof part.type === 'string') call.type = part.type;
        const fn = part.function as Record<string, unknown> | undefined;
        const into = call.function as Record<string, string>;
        if (typeof fn?.name === 'string') into.name += fn.name;
        if (typeof fn?.arguments === 'string') into.arguments += fn.arguments;
      }
    } else if (typeof v === 'string') {
      message[k] = (typeof message[k] === 'string' ? message[k] : '') + v;
    } else {
      message[k] = v;
    }
  }
}

/** Collects a non-streaming response from the task's token frames. */
export class ResponseCollector {
  readonly #who: ResponseIdentity;
  readonly #parts: string[] = [];
  readonly #message: Record<string, unknown> = {};
  #logprobs: unknown[] | undefined;

  constructor(who: ResponseIdentity) {
    this.#who = who;
  }

  token(tok: TokenEvent): void {
    if (tok.t !== '') this.#parts.push(tok.t);
    if (tok.delta !== undefined) mergeDelta(this.#message, tok.delta);
    if (tok.logprobs !== undefined) {
      const lp = tok.logprobs as { content?: unknown } | unknown[];
      const list = Array.isArray(lp) ? lp : Array.isArray(lp?.content) ? (lp.content as unknown[]) : [lp];
      (this.#logprobs ??= []).push(...list);
    }
  }

  /** The whole response body. */
  body(end: EndEvent, fingerprint: string | undefined): Record<string, unknown> {
    const w = this.#who;
    const text = this.#parts.join('');
    const reason = finishReason(end);
    const head: Record<string, unknown> = {
      id: w.id,
      object: w.kind === 'chat' ? 'chat.completion' : 'text_completion',
      created: w.created,
      model: w.model,
      system_fingerprint: fingerprint ?? end.engine_version,
    };
    if (head.system_fingerprint === undefined) delete head.system_fingerprint;
    if (w.kind === 'chat') {
      const hasCalls = Array.isArray(this.#message.tool_calls) && this.#message.tool_calls.length > 0;
      const message = { role: 'assistant', content: text === '' && hasCalls ? null : text, ...this.#message };
      const choice = {
        index: 0,
        message,
        logprobs: this.#logprobs === undefined ? null : { content: this.#logprobs },
        finish_reason: reason,
      };
      return { ...head, choices: [choice], usage: usageOf(end) };
    }
    const choice = {
      index: 0,
      text,
      logprobs: this.#logprobs === undefined ? null : { content: this.#logprobs },
      finish_reason: reason,
    };
    return { ...head, choices: [choice], usage: usageOf(end) };
  }
}
