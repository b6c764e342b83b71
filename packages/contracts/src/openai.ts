import { z } from 'zod';
import { PoolCapabilitySchema } from './engine-calls.js';
import { ChatMessagesSchema, NamedToolChoiceSchema, ResponseFormatSchema, StopSchema } from './sampling.js';
import { TASK_LIMITS } from './task.js';

/**
 * The OpenAI-compatible door (`/v1` on orchestratord). Request bodies are loose: fields OpenAI
 * clients send that do not change the output (`store`, `metadata`, `parallel_tool_calls` …) are
 * accepted and ignored; every field that does is validated here and forwarded, or refused (`n` > 1).
 * `null` means "not set", as OpenAI treats it.
 */

const Json = z.record(z.string(), z.unknown());
const opt = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

const openAiCommon = {
  /** Alias, catalog id or ref of a model a pool serves (`GET /v1/models`). */
  model: z.string().min(1).max(512),
  stream: opt(z.boolean()),
  /** `include_usage`: a last chunk with `choices: []` and `usage`. */
  stream_options: opt(z.looseObject({ include_usage: z.boolean().optional() })),
  max_tokens: opt(z.int().min(1).max(TASK_LIMITS.maxTokensMax)),
  /** Only 1: one choice per request. */
  n: opt(z.literal(1, { error: 'n: only 1 choice per request is supported' })),
  seed: opt(z.int().min(0).max(0xffff_ffff)),
  temperature: opt(z.number().min(0).max(2)),
  top_p: opt(z.number().min(0).max(1)),
  top_k: opt(z.int().min(0).max(1000)),
  min_p: opt(z.number().min(0).max(1)),
  presence_penalty: opt(z.number().min(-2).max(2)),
  frequency_penalty: opt(z.number().min(-2).max(2)),
  repeat_penalty: opt(z.number().min(0).max(10)),
  logit_bias: opt(z.record(z.string().regex(/^\d+$/, 'logit_bias keys are token ids'), z.number().min(-100).max(100))),
  stop: opt(StopSchema),
  /** The caller's end-user id; also the conversation key for prompt-cache affinity. */
  user: opt(z.string().max(256)),
  /** `flex` queues the request in the batch lane; anything else is interactive. */
  service_tier: opt(z.string().max(32)),
  /** llama-orch extension: the admission lane. @default interactive */
  priority: opt(z.enum(['interactive', 'batch'])),
};

/** `POST /v1/chat/completions`. */
export const ChatCompletionRequestSchema = z
  .looseObject({
    ...openAiCommon,
    messages: ChatMessagesSchema,
    /** Newer name of `max_tokens`; wins when both are set. */
    max_completion_tokens: opt(z.int().min(1).max(TASK_LIMITS.maxTokensMax)),
    response_format: opt(ResponseFormatSchema),
    logprobs: opt(z.boolean()),
    top_logprobs: opt(z.int().min(0).max(20)),
    tools: opt(z.array(Json).max(128)),
    tool_choice: opt(z.union([z.enum(['none', 'auto', 'required']), NamedToolChoiceSchema])),
  })
  .meta({ id: 'ChatCompletionRequest' });
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

/** `POST /v1/completions` (legacy text completions). */
export const CompletionRequestSchema = z
  .looseObject({
    ...openAiCommon,
    /** One prompt (a one-element array is accepted). */
    prompt: z.union([z.string().max(TASK_LIMITS.promptMaxChars), z.tuple([z.string().max(TASK_LIMITS.promptMaxChars)])]),
    /** Only false: the prompt is not repeated in the output. */
    echo: opt(z.literal(false, { error: 'echo: not supported' })),
  })
  .meta({ id: 'CompletionRequest' });
export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;

export const UsageSchema = z
  .looseObject({
    prompt_tokens: z.int().nonnegative(),
    completion_tokens: z.int().nonnegative(),
    total_tokens: z.int().nonnegative(),
    /** `cached_tokens`: prompt tokens served from the engine's prompt cache. */
    prompt_tokens_details: z.looseObject({ cached_tokens: z.int().nonnegative() }).optional(),
  })
  .meta({ id: 'Usage' });
export type Usage = z.infer<typeof UsageSchema>;

const FinishReasonSchema = z.enum(['stop', 'length', 'tool_calls']).nullable();

/** Non-streaming `POST /v1/chat/completions`. */
export const ChatCompletionSchema = z
  .looseObject({
    id: z.string(),
    object: z.literal('chat.completion'),
    created: z.int(),
    model: z.string(),
    system_fingerprint: z.string().optional(),
    choices: z.array(z.looseObject({
      index: z.int(),
      message: z.looseObject({ role: z.literal('assistant'), content: z.string().nullable(), tool_calls: z.array(Json).optional() }),
      logprobs: Json.nullable().optional(),
      finish_reason: FinishReasonSchema,
    })),
    usage: UsageSchema,
  })
  .meta({ id: 'ChatCompletion' });

/** One `data:` chunk of a streaming `POST /v1/chat/completions`; the stream ends with `data: [DONE]`. */
export const ChatCompletionChunkSchema = z
  .looseObject({
    id: z.string(),
    object: z.literal('chat.completion.chunk'),
    created: z.int(),
    model: z.string(),
    system_fingerprint: z.string().optional(),
    choices: z.array(z.looseObject({
      index: z.int(),
      delta: z.looseObject({ role: z.literal('assistant').optional(), content: z.string().nullable().optional(), tool_calls: z.array(Json).optional() }),
      logprobs: Json.nullable().optional(),
      finish_reason: FinishReasonSchema,
    })),
    /** Only on the last chunk (`choices: []`) with `stream_options.include_usage`. */
    usage: UsageSchema.nullable().optional(),
  })
  .meta({ id: 'ChatCompletionChunk' });

/** `POST /v1/completions`, whole body or one streamed chunk (`usage` on the last with `include_usage`). */
export const CompletionSchema = z
  .looseObject({
    id: z.string(),
    object: z.literal('text_completion'),
    created: z.int(),
    model: z.string(),
    system_fingerprint: z.string().optional(),
    choices: z.array(z.looseObject({ index: z.int(), text: z.string(), logprobs: Json.nullable(), finish_reason: FinishReasonSchema })),
    usage: UsageSchema.nullable().optional(),
  })
  .meta({ id: 'Completion' });

/** One entry of `GET /v1/models`, and `GET /v1/models/{id}`. */
export const OpenAiModelSchema = z
  .strictObject({
    /** Alias, or the catalog id when the pool declares none. */
    id: z.string(),
    object: z.literal('model'),
    /** Unix seconds: when the first pool serving it registered. */
    created: z.int(),
    owned_by: z.string(),
    /** What the model's pools serve (issue 27): `chat`, `completion`, `embeddings`, `rerank`, `infill`. */
    capabilities: z.array(PoolCapabilitySchema).optional(),
  })
  .meta({ id: 'Model' });
export type OpenAiModel = z.infer<typeof OpenAiModelSchema>;

export const OpenAiModelListSchema = z
  .strictObject({ object: z.literal('list'), data: z.array(OpenAiModelSchema) })
  .meta({ id: 'ModelList' });

/** Every /v1 error: OpenAI's shape, with the ErrorEnvelope table's HTTP statuses. */
export const OpenAiErrorSchema = z
  .strictObject({
    error: z.strictObject({
      message: z.string(),
      /** `invalid_request_error`, `authentication_error`, `not_found_error`, `rate_limit_error`, `server_error`, `unavailable_error`. */
      type: z.string(),
      /** The request field at fault, when one is. */
      param: z.string().nullable(),
      /** `model_not_found`, `invalid_value`, or the ErrorEnvelope code (`ADMISSION_REJECT` …). */
      code: z.string().nullable(),
    }),
  })
  .meta({ id: 'OpenAiError' });
export type OpenAiError = z.infer<typeof OpenAiErrorSchema>;
