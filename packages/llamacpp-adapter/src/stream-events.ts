import type { DispatchEvent } from '@llama-orch/contracts';
import type { z } from 'zod';
import { ChatChunkSchema, CompletionFrameSchema, EngineErrorBodySchema } from './engine-schemas.js';
import { EngineProtocolError, EngineRejectedError, WorkerResetError } from './errors.js';

/** OpenAI's name for why generation stopped. */
export type FinishReason = 'stop' | 'length' | 'tool_calls';

/**
 * The token record: one piece of generated text, `{type: 'token', t, i, delta?, logprobs?}`
 * (`t`: the text piece, '' for a chat delta that carries only other fields; `i` from 0, no gaps;
 * `delta`: a chat delta's fields other than `content` and `role`; `logprobs`: the engine's
 * probabilities for this piece). The same record from the decoder to the client's door:
 * pool-managerd writes it as an NDJSON line, orchestratord validates it with
 * `DispatchEventSchema` and keeps its `{t, i, delta?, logprobs?}` in the task's frame log, and each
 * door encodes that when it writes.
 */
export type TokenRecord = Extract<DispatchEvent, { type: 'token' }>;

/**
 * Normalised events of either engine stream (`/completion` or `/v1/chat/completions`). Exactly one
 * `end` closes a successful stream.
 */
export type CompletionEvent =
  | TokenRecord
  | {
      type: 'end';
      /** Engine's generated-token count (token events may be fewer: UTF-8 merging, reference §4.2). */
      tokens_out: number;
      /** Engine decode time (`timings.predicted_ms`). */
      decode_ms: number;
      /**
       * `none` (stopped without a natural reason, e.g. `n_predict: 0`) is reported as `limit`. A chat
       * says only `stop` or `length`: `stop` (and `tool_calls`) become `eos`, since a stop word and
       * the end-of-sequence token look the same there.
       */
      stop_type: 'eos' | 'limit' | 'word';
      finish_reason: FinishReason;
      /** Prompt tokens, cached ones included (`tokens_evaluated` / `usage.prompt_tokens`), when the engine says. */
      prompt_tokens?: number;
      /** Of those, taken from the slot's prompt cache (`timings.cache_n` / `usage.prompt_tokens_details.cached_tokens`), when the engine says. */
      cached_tokens?: number;
    };

type EndEvent = Extract<CompletionEvent, { type: 'end' }>;
type EndFigures = Pick<EndEvent, 'tokens_out' | 'decode_ms' | 'prompt_tokens' | 'cached_tokens'>;

function errorFrameCheck(json: unknown, url: string): void {
  // Only a frame with an `error` member can be an error frame. Trying the error schema on every
  // token frame had zod build a failed result, issues and all, per token.
  if (typeof json === 'object' && json !== null && 'error' in json) {
    const error = EngineErrorBodySchema.safeParse(json);
    if (error.success) {
      const e = error.data.error;
      throw new EngineRejectedError(e.code ?? 500, e.type, e.message, { url, inStream: true });
    }
  }
}

function parseJson(payload: string, url: string): unknown {
  try {
    return JSON.parse(payload);
  } catch (err) {
    throw new EngineProtocolError(
      'llama-server sent a frame that is not JSON',
      { url, frame: payload.slice(0, 200) },
      { cause: err },
    );
  }
}

/**
 * Parses one `data:` payload: JSON, then an error frame (`{"error":{…}}`, sent when the engine fails
 * after the stream began) becomes {@link EngineRejectedError}, anything else must match `schema`.
 */
function parseFrame<S extends z.ZodType>(json: unknown, payload: string, schema: S, url: string): z.infer<S> {
  errorFrameCheck(json, url);
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new EngineProtocolError(
      'llama-server sent a frame of unknown shape',
      { url, frame: payload.slice(0, 200) },
      { cause: parsed.error },
    );
  }
  return parsed.data;
}

type Loose = Record<string, unknown>;

function isRecord(v: unknown): v is Loose {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * A `/completion` token frame checked by hand: exactly the frames `CompletionFrameSchema` accepts
 * as tokens among those without an `error` member, or undefined for anything else (which then
 * takes the schema path with its errors). Performance notes: token frames checked by hand.
 */
export function plainTokenFrame(
  json: unknown,
): { content: string; stop: false; completion_probabilities?: unknown[] } | undefined {
  if (!isRecord(json) || 'error' in json || json.stop !== false || typeof json.content !== 'string') return undefined;
  const n = json.tokens_predicted;
  if (n !== undefined && !(Number.isSafeInteger(n) && (n as number) >= 0)) return undefined;
  const probs = json.completion_probabilities;
  if (probs !== undefined && !Array.isArray(probs)) return undefined;
  return json as { content: string; stop: false; completion_probabilities?: unknown[] };
}

/**
 * A `/v1/chat/completions` chunk that is one piece of text and nothing else, checked by hand: its
 * content, or undefined for any other chunk (role delta, finish, usage, tool calls, logprobs,
 * anything malformed), which then takes `ChatChunkSchema`'s path with its errors. Almost every
 * chunk of a stream is such a piece, and the schema's parse (a copy of the loose objects) with the
 * delta's rest-spread was most of pool-managerd's extra work per chat token. Performance notes:
 * chat pieces checked by hand.
 */
export function plainChatPiece(json: unknown): string | undefined {
  if (!isRecord(json) || 'error' in json || json.usage !== undefined || json.timings !== undefined) return undefined;
  const choices = json.choices;
  if (!Array.isArray(choices) || choices.length !== 1) return undefined;
  const choice: unknown = choices[0];
  if (!isRecord(choice) || (choice.finish_reason !== undefined && choice.finish_reason !== null)) return undefined;
  if (
    (choice.logprobs !== undefined && choice.logprobs !== null) ||
    (choice.index !== undefined && !Number.isInteger(choice.index))
  )
    return undefined;
  const delta = choice.delta;
  if (!isRecord(delta)) return undefined;
  for (const key in delta) if (key !== 'content') return undefined;
  const content = delta.content;
  return typeof content === 'string' && content !== '' ? content : undefined;
}

/**
 * The `/completion` stream as events, fed one `data:` payload at a time: a `token` for every frame
 * with non-empty `content` (or with probabilities), exactly one `end` from the `stop:true` frame.
 * {@link finish} throws {@link WorkerResetError} when the payloads ended without it (crash,
 * SIGTERM, SIGKILL look like that, reference §3).
 */
export class CompletionDecoder {
  #i = 0;
  #ended = false;

  constructor(readonly url: string) {}

  get ended(): boolean {
    return this.#ended;
  }

  /** The event of one payload, or undefined (a frame that makes none). Throws adapter errors. */
  payload(payload: string): CompletionEvent | undefined {
    const json = parseJson(payload, this.url);
    const frame = plainTokenFrame(json) ?? parseFrame(json, payload, CompletionFrameSchema, this.url);
    if (frame.stop === true) {
      const stopType = frame.stop_type === 'none' ? 'limit' : frame.stop_type;
      this.#ended = true;
      return {
        type: 'end',
        tokens_out: frame.tokens_predicted,
        decode_ms: frame.timings.predicted_ms,
        stop_type: stopType,
        finish_reason: stopType === 'limit' ? 'length' : 'stop',
        ...(frame.tokens_evaluated !== undefined ? { prompt_tokens: frame.tokens_evaluated } : {}),
        ...(frame.timings.cache_n !== undefined ? { cached_tokens: frame.timings.cache_n } : {}),
      };
    }
    // Empty content: a byte token waiting for the rest of its UTF-8 sequence, or a possible stop-word prefix.
    const probs = frame.completion_probabilities;
    if (frame.content === '' && probs === undefined) return undefined;
    return probs !== undefined
      ? { type: 'token', t: frame.content, i: this.#i++, logprobs: probs }
      : { type: 'token', t: frame.content, i: this.#i++ };
  }

  /** The payloads ended; throws unless the final frame came. */
  finish(): void {
    if (!this.#ended)
      throw new WorkerResetError(`llama-server stream ended without a final frame after ${this.#i} token events`, {
        url: this.url,
        tokens: this.#i,
      });
  }
}

function finishReasonOf(engine: string): FinishReason {
  return engine === 'length' || engine === 'tool_calls' ? engine : 'stop';
}

/**
 * The `/v1/chat/completions` stream (with `stream_options.include_usage`) as events, one payload
 * at a time. A chunk becomes a `token` when its delta has content, or fields other than `role`, or
 * the choice has `logprobs`: `t` is the content (or ''), the other fields go to `delta`. The
 * role-only first chunk makes no event. The `finish_reason` chunk and the usage chunk make the
 * `end`, given at `data: [DONE]`; {@link finish} throws {@link WorkerResetError} for a body that
 * ended before `[DONE]`, and `[DONE]` without a usage chunk is an {@link EngineProtocolError}.
 */
export class ChatDecoder {
  #i = 0;
  #ended = false;
  #finish: FinishReason | undefined;
  #end: EndFigures | undefined;

  constructor(readonly url: string) {}

  get ended(): boolean {
    return this.#ended;
  }

  payload(payload: string): CompletionEvent | undefined {
    const url = this.url;
    if (payload === '[DONE]') {
      if (this.#end === undefined || this.#finish === undefined) {
        throw new EngineProtocolError('llama-server ended a chat stream without its finish_reason and usage chunks', {
          url,
          tokens: this.#i,
        });
      }
      this.#ended = true;
      return {
        type: 'end',
        ...this.#end,
        stop_type: this.#finish === 'length' ? 'limit' : 'eos',
        finish_reason: this.#finish,
      };
    }
    const json = parseJson(payload, url);
    const piece = plainChatPiece(json);
    if (piece !== undefined) return { type: 'token', t: piece, i: this.#i++ };
    const chunk = parseFrame(json, payload, ChatChunkSchema, url);
    let ev: CompletionEvent | undefined;
    const choice = chunk.choices[0];
    if (choice !== undefined) {
      const { content, role: _role, ...rest } = choice.delta ?? {};
      const t = typeof content === 'string' ? content : '';
      const logprobs = choice.logprobs ?? undefined;
      const hasRest = Object.keys(rest).length > 0;
      if (t !== '' || hasRest || logprobs !== undefined) {
        ev = {
          type: 'token',
          t,
          i: this.#i++,
          ...(hasRest ? { delta: rest } : {}),
          ...(logprobs !== undefined ? { logprobs } : {}),
        };
      }
      if (typeof choice.finish_reason === 'string') this.#finish = finishReasonOf(choice.finish_reason);
    }
    if (chunk.usage !== undefined) {
      if (chunk.timings === undefined)
        throw new EngineProtocolError('llama-server sent a usage chunk without timings', {
          url,
          frame: payload.slice(0, 200),
        });
      const end: EndFigures = {
        tokens_out: chunk.usage.completion_tokens,
        decode_ms: chunk.timings.predicted_ms,
        prompt_tokens: chunk.usage.prompt_tokens,
      };
      const cached = chunk.usage.prompt_tokens_details?.cached_tokens ?? chunk.timings.cache_n;
      if (cached !== undefined) end.cached_tokens = cached;
      this.#end = end;
    }
    return ev;
  }

  finish(): void {
    if (!this.#ended)
      throw new WorkerResetError(`llama-server chat stream ended without [DONE] after ${this.#i} token events`, {
        url: this.url,
        tokens: this.#i,
      });
  }
}
