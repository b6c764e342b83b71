import { z } from 'zod';

/**
 * Shapes of llama-server replies the adapter relies on (reference §4). Objects are loose: the engine
 * adds fields between versions, and only the named ones are used.
 */

/** `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}` */
export const EngineErrorBodySchema = z.looseObject({
  error: z.looseObject({
    code: z.number().optional(),
    message: z.string(),
    type: z.string().optional(),
  }),
});

/** `GET /props` (subset). */
export const PropsReplySchema = z.looseObject({
  default_generation_settings: z.looseObject({ n_ctx: z.int().nonnegative() }),
  total_slots: z.int().positive(),
  build_info: z.string(),
  model_path: z.string().optional(),
  model_alias: z.string().optional(),
  is_sleeping: z.boolean().optional(),
});

/** `GET /slots` (subset of each slot). */
export const SlotsReplySchema = z.array(
  z.looseObject({
    id: z.int().nonnegative(),
    n_ctx: z.int().nonnegative(),
    is_processing: z.boolean(),
    id_task: z.int().optional(),
  }),
);

/** A token frame of the `/completion` stream. */
const TokenFrameSchema = z.looseObject({
  content: z.string(),
  stop: z.literal(false),
  tokens_predicted: z.int().nonnegative().optional(),
  /** With `n_probs`: the chosen token and its top alternatives. */
  completion_probabilities: z.array(z.unknown()).optional(),
});

/** The final frame of the `/completion` stream. */
const FinalFrameSchema = z.looseObject({
  content: z.string(),
  stop: z.literal(true),
  tokens_predicted: z.int().nonnegative(),
  /** Prompt tokens, cached ones included. */
  tokens_evaluated: z.int().nonnegative().optional(),
  stop_type: z.enum(['none', 'eos', 'limit', 'word']),
  /** `cache_n`: prompt tokens taken from the slot's cache instead of evaluated. */
  timings: z.looseObject({ predicted_ms: z.number().nonnegative(), cache_n: z.int().nonnegative().optional() }),
  id_slot: z.int().optional(),
});

/** A token or final `data:` frame of the `/completion` stream (error frames: {@link EngineErrorBodySchema}). */
export const CompletionFrameSchema = z.discriminatedUnion('stop', [TokenFrameSchema, FinalFrameSchema]);
export type CompletionFrame = z.infer<typeof CompletionFrameSchema>;

/**
 * One `data:` chunk of the `/v1/chat/completions` stream (reference §4.4): the role delta, one chunk
 * per content (or tool-call, reasoning) diff, the `finish_reason` chunk, then — with
 * `stream_options.include_usage` — a `choices: []` chunk with `usage` and `timings`.
 */
export const ChatChunkSchema = z.looseObject({
  choices: z.array(
    z.looseObject({
      index: z.int().optional(),
      delta: z.record(z.string(), z.unknown()).optional(),
      finish_reason: z.string().nullable().optional(),
      logprobs: z.unknown().optional(),
    }),
  ),
  usage: z
    .looseObject({
      completion_tokens: z.int().nonnegative(),
      prompt_tokens: z.int().nonnegative(),
      prompt_tokens_details: z.looseObject({ cached_tokens: z.int().nonnegative().optional() }).optional(),
    })
    .optional(),
  timings: z
    .looseObject({ predicted_ms: z.number().nonnegative(), cache_n: z.int().nonnegative().optional() })
    .optional(),
});
export type ChatChunk = z.infer<typeof ChatChunkSchema>;
