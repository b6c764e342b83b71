import type { z } from 'zod';
import { ChatChunkSchema, CompletionFrameSchema, EngineErrorBodySchema } from './engine-schemas.js';
import { EngineProtocolError, EngineRejectedError, WorkerResetError } from './errors.js';

/** OpenAI's name for why generation stopped. */
export type FinishReason = 'stop' | 'length' | 'tool_calls';

/**
 * Normalised events of either engine stream (`/completion` or `/v1/chat/completions`). Exactly one
 * `end` closes a successful stream.
 */
export type CompletionEvent =
  | {
      type: 'token';
      /** Text piece ('' for a chat delta that carries only other fields). */
      t: string;
      /** From 0, no gaps. */
      i: number;
      /** A chat delta's fields other than `content` and `role` (`tool_calls`, `reasoning_content` …). */
      delta?: Record<string, unknown>;
      /** The engine's probabilities for this piece (`completion_probabilities` / the chunk's `logprobs`). */
      logprobs?: unknown;
    }
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

/**
 * Parses one `data:` payload: JSON, then an error frame (`{"error":{…}}`, sent when the engine fails
 * after the stream began) becomes {@link EngineRejectedError}, anything else must match `schema`.
 */
function parseFrame<S extends z.ZodType>(payload: string, schema: S, url: string): z.infer<S> {
  let json: unknown;
  try {
    json = JSON.parse(payload);
  } catch (err) {
    throw new EngineProtocolError('llama-server sent a frame that is not JSON', { url, frame: payload.slice(0, 200) }, { cause: err });
  }
  // Only a frame with an `error` member can be an error frame. Trying the error schema on every
  // token frame had zod build a failed result, issues and all, per token.
  if (typeof json === 'object' && json !== null && 'error' in json) {
    const error = EngineErrorBodySchema.safeParse(json);
    if (error.success) {
      const e = error.data.error;
      throw new EngineRejectedError(e.code ?? 500, e.type, e.message, { url, inStream: true });
    }
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new EngineProtocolError('llama-server sent a frame of unknown shape', { url, frame: payload.slice(0, 200) }, { cause: parsed.error });
  }
  return parsed.data;
}

/**
 * The `/completion` stream as events: a `token` for every frame with non-empty `content` (or with
 * probabilities), exactly one `end` from the `stop:true` frame. Throws {@link WorkerResetError}
 * when the payloads end without it (crash, SIGTERM, SIGKILL look like that, reference §3).
 */
export async function* completionEvents(payloads: AsyncIterable<string>, url: string): AsyncGenerator<CompletionEvent, void, undefined> {
  let i = 0;
  for await (const payload of payloads) {
    const frame = parseFrame(payload, CompletionFrameSchema, url);
    if (frame.stop) {
      const stopType = frame.stop_type === 'none' ? 'limit' : frame.stop_type;
      yield {
        type: 'end',
        tokens_out: frame.tokens_predicted,
        decode_ms: frame.timings.predicted_ms,
        stop_type: stopType,
        finish_reason: stopType === 'limit' ? 'length' : 'stop',
        ...(frame.tokens_evaluated !== undefined ? { prompt_tokens: frame.tokens_evaluated } : {}),
        ...(frame.timings.cache_n !== undefined ? { cached_tokens: frame.timings.cache_n } : {}),
      };
      return;
    }
    // Empty content: a byte token waiting for the rest of its UTF-8 sequence, or a possible stop-word prefix.
    const probs = frame.completion_probabilities;
    if (frame.content !== '' || probs !== undefined) {
      yield probs !== undefined ? { type: 'token', t: frame.content, i: i++, logprobs: probs } : { type: 'token', t: frame.content, i: i++ };
    }
  }
  throw new WorkerResetError(`llama-server stream ended without a final frame after ${i} token events`, { url, tokens: i });
}

function finishReasonOf(engine: string): FinishReason {
  return engine === 'length' || engine === 'tool_calls' ? engine : 'stop';
}

/**
 * The `/v1/chat/completions` stream (with `stream_options.include_usage`) as events. A chunk
 * becomes a `token` when its delta has content, or fields other than `role`, or the choice has
 * `logprobs`: `t` is the content (or ''), the other fields go to `delta`. The role-only first
 * chunk makes no event. The `finish_reason` chunk and the usage chunk make the `end`, yielded at
 * `data: [DONE]`; a body that ends before `[DONE]` is a {@link WorkerResetError}, `[DONE]` without
 * a usage chunk an {@link EngineProtocolError}.
 */
export async function* chatEvents(payloads: AsyncIterable<string>, url: string): AsyncGenerator<CompletionEvent, void, undefined> {
  let i = 0;
  let finish: FinishReason | undefined;
  let end: Pick<EndEvent, 'tokens_out' | 'decode_ms' | 'prompt_tokens' | 'cached_tokens'> | undefined;
  for await (const payload of payloads) {
    if (payload === '[DONE]') {
      if (end === undefined || finish === undefined) {
        throw new EngineProtocolError('llama-server ended a chat stream without its finish_reason and usage chunks', { url, tokens: i });
      }
      yield { type: 'end', ...end, stop_type: finish === 'length' ? 'limit' : 'eos', finish_reason: finish };
      return;
    }
    const chunk = parseFrame(payload, ChatChunkSchema, url);
    const choice = chunk.choices[0];
    if (choice !== undefined) {
      const { content, role: _role, ...rest } = choice.delta ?? {};
      const t = typeof content === 'string' ? content : '';
      const logprobs = choice.logprobs ?? undefined;
      const hasRest = Object.keys(rest).length > 0;
      if (t !== '' || hasRest || logprobs !== undefined) {
        yield { type: 'token', t, i: i++, ...(hasRest ? { delta: rest } : {}), ...(logprobs !== undefined ? { logprobs } : {}) };
      }
      if (typeof choice.finish_reason === 'string') finish = finishReasonOf(choice.finish_reason);
    }
    if (chunk.usage !== undefined) {
      if (chunk.timings === undefined) throw new EngineProtocolError('llama-server sent a usage chunk without timings', { url, frame: payload.slice(0, 200) });
      end = {
        tokens_out: chunk.usage.completion_tokens,
        decode_ms: chunk.timings.predicted_ms,
        prompt_tokens: chunk.usage.prompt_tokens,
      };
      const cached = chunk.usage.prompt_tokens_details?.cached_tokens ?? chunk.timings.cache_n;
      if (cached !== undefined) end.cached_tokens = cached;
    }
  }
  throw new WorkerResetError(`llama-server chat stream ended without [DONE] after ${i} token events`, { url, tokens: i });
}
