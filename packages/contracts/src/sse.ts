import { z } from 'zod';
import { ErrorCodeSchema } from './errors.js';

/** First frame of every task stream. */
export const StartedEventSchema = z
  .strictObject({
    /** Queue position when the stream opened (0-based). */
    queue_position: z.int().nonnegative(),
    /** Predicted wait until the first token, milliseconds. */
    predicted_start_ms: z.int().nonnegative(),
  })
  .meta({ id: 'SseStarted' });

/** One piece of generated text. Not 1:1 with engine tokens: the engine merges partial UTF-8. */
export const TokenEventSchema = z
  .strictObject({
    /** Text of this piece. */
    t: z.string(),
    /** Index of the frame among token frames, from 0 with no gaps. */
    i: z.int().nonnegative(),
    /** A chat piece's other delta fields (`tool_calls`, `reasoning_content` …), as the engine sent them. */
    delta: z.record(z.string(), z.unknown()).optional(),
    /** The engine's log probabilities for this piece, when the request asked for them. */
    logprobs: z.unknown().optional(),
  })
  .meta({ id: 'SseToken' });

/** Queue and progress telemetry; verbose streams add narration. */
export const MetricsEventSchema = z
  .strictObject({
    /** Tasks queued cluster-wide. */
    queue_depth: z.int().nonnegative(),
    /** This task's current queue position, while queued. */
    queue_position: z.int().nonnegative().optional(),
    /** Estimated probability (0..1) of finishing before the deadline. */
    on_time_probability: z.number().min(0).max(1),
    /** Tokens relayed so far. */
    tokens_out: z.int().nonnegative().optional(),
    /** Verbose only: one-line narration for people. */
    human: z.string().optional(),
    /** Verbose only: lifecycle phase. */
    phase: z.enum(['queued', 'preparing', 'dispatching', 'streaming']).optional(),
    /** Verbose only: preparation progress (0..1) when a model or engine is being provisioned. */
    prep: z.number().min(0).max(1).optional(),
  })
  .meta({ id: 'SseMetrics' });

/** Terminal frame of a task that ran to completion or was cancelled. */
export const EndEventSchema = z
  .strictObject({
    /** Tokens generated, as counted by the engine (`tokens_predicted`). */
    tokens_out: z.int().nonnegative(),
    /** Engine decode time, milliseconds. */
    decode_ms: z.number().nonnegative(),
    /** Same value as `decode_ms` (upstream name, kept for compatibility). */
    decode_time_ms: z.number().nonnegative(),
    /** Pool that served the task; absent when cancelled before placement. */
    pool_id: z.string().optional(),
    /** Node that served the task; absent when cancelled before placement. */
    node_id: z.string().optional(),
    /** Engine build that produced the tokens (e.g. `b1-de3ff81`). */
    engine_version: z.string().optional(),
    /** Why generation stopped: `eos`, `limit` (max_tokens), `word` (stop string), `cancel`. */
    stop_type: z.enum(['eos', 'limit', 'word', 'cancel']).optional(),
    /** True when the task ended because it was cancelled (client request or disconnect). */
    canceled: z.boolean().optional(),
    /** Prompt tokens the engine evaluated or took from its cache (`tokens_evaluated`). */
    prompt_tokens: z.int().nonnegative().optional(),
    /** Of `prompt_tokens`, how many came from the engine's prompt cache (`timings.cache_n`). */
    cached_tokens: z.int().nonnegative().optional(),
    /** OpenAI's reason: `stop` (end of text or a stop string), `length` (max_tokens) or `tool_calls`. */
    finish_reason: z.enum(['stop', 'length', 'tool_calls']).optional(),
  })
  .meta({ id: 'SseEnd' });

/** Terminal frame of a task that failed. */
export const ErrorEventSchema = z
  .strictObject({
    /** Typed error code. */
    code: ErrorCodeSchema,
    /** Human message. */
    message: z.string(),
    /** Whether resubmitting may succeed. */
    retriable: z.boolean(),
    /** Engine involved, when known. */
    engine: z.string().optional(),
  })
  .meta({ id: 'SseError' });

export type StartedEvent = z.infer<typeof StartedEventSchema>;
export type TokenEvent = z.infer<typeof TokenEventSchema>;
export type MetricsEvent = z.infer<typeof MetricsEventSchema>;
export type EndEvent = z.infer<typeof EndEventSchema>;
export type ErrorEvent = z.infer<typeof ErrorEventSchema>;

/** Names of SSE events and their payload schemas. */
export const SSE_EVENTS = Object.freeze({
  started: StartedEventSchema,
  token: TokenEventSchema,
  metrics: MetricsEventSchema,
  end: EndEventSchema,
  error: ErrorEventSchema,
});
export type SseEventName = keyof typeof SSE_EVENTS;

/** A task stream frame as a tagged union (`event` = SSE event name). */
export const SseFrameSchema = z.discriminatedUnion('event', [
  z.strictObject({ event: z.literal('started'), data: StartedEventSchema }),
  z.strictObject({ event: z.literal('token'), data: TokenEventSchema }),
  z.strictObject({ event: z.literal('metrics'), data: MetricsEventSchema }),
  z.strictObject({ event: z.literal('end'), data: EndEventSchema }),
  z.strictObject({ event: z.literal('error'), data: ErrorEventSchema }),
]);
export type SseFrame = z.infer<typeof SseFrameSchema>;

/** Serialises one frame in the wire format `id: <seq>\nevent: <name>\ndata: <json>\n\n`. */
export function formatSseFrame(id: number, frame: SseFrame): string {
  return `id: ${id}\nevent: ${frame.event}\ndata: ${JSON.stringify(frame.data)}\n\n`;
}
