import { z } from 'zod';
import { TASK_LIMITS } from './task.js';

/**
 * The Anthropic Messages door (`POST /v1/messages`, `POST /v1/messages/count_tokens` on
 * orchestratord), in Anthropic's shape. Request bodies are loose (fields that do not change the
 * output, such as `metadata.user_id` beyond the session key or `service_tier`, are accepted and
 * ignored); every field that does is validated here, translated to a chat task, or refused with a
 * 400 naming it (images, extended thinking).
 */

const Json = z.record(z.string(), z.unknown());

export const AnthropicTextBlockSchema = z.looseObject({ type: z.literal('text'), text: z.string() });

const ContentBlockSchema = z.discriminatedUnion('type', [
  AnthropicTextBlockSchema,
  z.looseObject({ type: z.literal('tool_use'), id: z.string().min(1).max(256), name: z.string().min(1).max(256), input: Json }),
  z.looseObject({
    type: z.literal('tool_result'),
    tool_use_id: z.string().min(1).max(256),
    /** Text, or text blocks (joined). */
    content: z.union([z.string(), z.array(AnthropicTextBlockSchema).max(256)]).optional(),
    is_error: z.boolean().optional(),
  }),
  /** A thinking block of an earlier assistant turn, sent back as the engine's `reasoning_content`. */
  z.looseObject({ type: z.literal('thinking'), thinking: z.string() }),
]);

export const AnthropicMessageParamSchema = z.looseObject({
  role: z.enum(['user', 'assistant']),
  content: z.union([z.string(), z.array(ContentBlockSchema).max(256)]),
});
export type AnthropicMessageParam = z.infer<typeof AnthropicMessageParamSchema>;

export const AnthropicToolSchema = z.looseObject({
  name: z.string().min(1).max(128),
  description: z.string().max(16_384).optional(),
  /** JSON Schema of the tool's input. */
  input_schema: Json,
});

/** `auto`, `any` (some tool must be called), `tool` (this one), `none`. */
export const AnthropicToolChoiceSchema = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('auto') }),
  z.looseObject({ type: z.literal('any') }),
  z.looseObject({ type: z.literal('tool'), name: z.string().min(1) }),
  z.looseObject({ type: z.literal('none') }),
]);

const anthropicCommon = {
  /** Alias, catalog id or ref of a model a pool serves (`GET /v1/models`). */
  model: z.string().min(1).max(512),
  messages: z.array(AnthropicMessageParamSchema).min(1).max(1024),
  /** The system prompt: text, or text blocks (concatenated). */
  system: z.union([z.string(), z.array(AnthropicTextBlockSchema).max(256)]).optional(),
  tools: z.array(AnthropicToolSchema).max(128).optional(),
  tool_choice: AnthropicToolChoiceSchema.optional(),
  /** Only `disabled`: the engine's reasoning budget is not offered through this door. */
  thinking: z.looseObject({ type: z.literal('disabled', { error: 'thinking: extended thinking is not supported' }) }).optional(),
};

/** `POST /v1/messages`. */
export const AnthropicMessagesRequestSchema = z
  .looseObject({
    ...anthropicCommon,
    max_tokens: z.int().min(1).max(TASK_LIMITS.maxTokensMax),
    stream: z.boolean().optional(),
    stop_sequences: z.array(z.string().min(1).max(256)).max(16).optional(),
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().min(0).max(1).optional(),
    top_k: z.int().min(0).max(1000).optional(),
    /** `user_id` is the conversation key (prompt-cache affinity), like `/v1`'s `user`. */
    metadata: z.looseObject({ user_id: z.string().max(256).nullable().optional() }).optional(),
  })
  .meta({ id: 'AnthropicMessagesRequest' });
export type AnthropicMessagesRequest = z.infer<typeof AnthropicMessagesRequestSchema>;

/** `POST /v1/messages/count_tokens`: the same conversation, no generation settings. */
export const AnthropicCountTokensRequestSchema = z.looseObject(anthropicCommon).meta({ id: 'AnthropicCountTokensRequest' });
export type AnthropicCountTokensRequest = z.infer<typeof AnthropicCountTokensRequestSchema>;

export const AnthropicUsageSchema = z.looseObject({
  /** Prompt tokens not read from the engine's prompt cache. */
  input_tokens: z.int().nonnegative(),
  output_tokens: z.int().nonnegative(),
  cache_read_input_tokens: z.int().nonnegative().optional(),
});

/** A non-streamed `POST /v1/messages` answer. */
export const AnthropicMessageSchema = z
  .looseObject({
    id: z.string(),
    type: z.literal('message'),
    role: z.literal('assistant'),
    content: z.array(Json),
    model: z.string(),
    /** `end_turn`, `max_tokens`, `tool_use` (`stop_sequence` is not told apart from `end_turn` by a chat engine). */
    stop_reason: z.enum(['end_turn', 'max_tokens', 'tool_use', 'stop_sequence']).nullable(),
    stop_sequence: z.string().nullable(),
    usage: AnthropicUsageSchema,
  })
  .meta({ id: 'AnthropicMessage' });
export type AnthropicMessage = z.infer<typeof AnthropicMessageSchema>;

export const AnthropicCountTokensSchema = z.strictObject({ input_tokens: z.int().nonnegative() }).meta({ id: 'AnthropicCountTokens' });

/** Every error of the door: `{type: 'error', error: {type, message}}` with the ErrorEnvelope statuses. */
export const AnthropicErrorSchema = z
  .strictObject({
    type: z.literal('error'),
    error: z.strictObject({
      /** `invalid_request_error`, `authentication_error`, `permission_error`, `not_found_error`, `request_too_large`, `rate_limit_error`, `api_error`, `overloaded_error`. */
      type: z.string(),
      message: z.string(),
    }),
  })
  .meta({ id: 'AnthropicError' });
export type AnthropicError = z.infer<typeof AnthropicErrorSchema>;
