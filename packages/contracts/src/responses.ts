import { z } from 'zod';
import { TASK_LIMITS } from './task.js';

/**
 * The OpenAI Responses door (`POST /v1/responses` on orchestratord) as a chat engine can serve it:
 * responses are stored by default (`store`, kept `ORCHD_TASK_RETENTION_MS`), continued with
 * `previous_response_id`, run in the background (`background: true`), read back, listed, cancelled
 * and deleted under `/v1/responses/{id}`. What needs more (`conversation` objects, stored prompts)
 * and tools other than functions are refused with a 400 naming the field. Loose otherwise: fields
 * that do not change the output (`include`, `reasoning`, `parallel_tool_calls`, `truncation`,
 * `service_tier` …) are accepted and ignored.
 */

const Json = z.record(z.string(), z.unknown());
const opt = <T extends z.ZodType>(schema: T) => schema.nullable().optional();
const refused = (why: string) =>
  z
    .unknown()
    .refine((v) => v === undefined || v === null, { message: why })
    .optional();

const TextPartSchema = z.looseObject({
  type: z.enum(['input_text', 'output_text'], { error: 'only input_text and output_text parts are supported (no images or files)' }),
  text: z.string(),
});

/** One item of `input`: a message, a function call the model made, or its output. */
export const ResponseInputItemSchema = z.union([
  z.looseObject({
    type: z.literal('message').optional(),
    role: z.enum(['user', 'system', 'developer', 'assistant']),
    /** Text, or text parts (`input_text`, `output_text`); images and files are not supported. */
    content: z.union([z.string(), z.array(TextPartSchema).max(256)]),
  }),
  z.looseObject({ type: z.literal('function_call'), call_id: z.string().min(1).max(256), name: z.string().min(1).max(256), arguments: z.string() }),
  z.looseObject({ type: z.literal('function_call_output'), call_id: z.string().min(1).max(256), output: z.union([z.string(), z.array(TextPartSchema).max(256)]) }),
]);
export type ResponseInputItem = z.infer<typeof ResponseInputItemSchema>;

export const ResponseFunctionToolSchema = z.looseObject({
  type: z.literal('function', { error: 'only function tools are supported' }),
  name: z.string().min(1).max(128),
  description: z.string().max(16_384).nullable().optional(),
  parameters: Json.nullable().optional(),
  strict: z.boolean().nullable().optional(),
});

/** `POST /v1/responses`. */
export const ResponsesRequestSchema = z
  .looseObject({
    /** Alias, catalog id or ref of a model a pool serves (`GET /v1/models`). */
    model: z.string().min(1).max(512),
    /** A user message, or the conversation as items. */
    input: z.union([z.string().max(TASK_LIMITS.promptMaxChars), z.array(ResponseInputItemSchema).min(1).max(1024)]),
    /** A system message before the input. */
    instructions: opt(z.string().max(TASK_LIMITS.promptMaxChars)),
    max_output_tokens: opt(z.int().min(1).max(TASK_LIMITS.maxTokensMax)),
    temperature: opt(z.number().min(0).max(2)),
    top_p: opt(z.number().min(0).max(1)),
    stream: opt(z.boolean()),
    tools: opt(z.array(ResponseFunctionToolSchema).max(128)),
    tool_choice: opt(z.union([z.enum(['none', 'auto', 'required']), z.looseObject({ type: z.literal('function'), name: z.string().min(1) })])),
    /** `format`: `text`, `json_object` or `json_schema` (`name`, `schema`), the chat's `response_format`. */
    text: opt(
      z.looseObject({
        format: z
          .discriminatedUnion('type', [
            z.looseObject({ type: z.literal('text') }),
            z.looseObject({ type: z.literal('json_object') }),
            z.looseObject({ type: z.literal('json_schema'), name: z.string().min(1).max(64), schema: Json, strict: z.boolean().nullable().optional() }),
          ])
          .optional(),
      }),
    ),
    /** The conversation key for prompt-cache affinity (`safety_identifier` and `prompt_cache_key` count too). */
    user: opt(z.string().max(256)),
    metadata: opt(z.record(z.string(), z.string())),
    /**
     * Keep the response (its output, input items and conversation) for `GET /v1/responses/{id}` and
     * `previous_response_id`, for `ORCHD_TASK_RETENTION_MS`, readable by the key that created it and
     * operator keys. @default true (as OpenAI's API); false: nothing is kept.
     */
    store: opt(z.boolean()),
    /** A stored response this one continues: its conversation and output come before `input`. */
    previous_response_id: opt(z.string().min(1).max(256)),
    conversation: refused('conversation objects are not supported: chain responses with previous_response_id, or send the whole conversation in input'),
    /** Answer at once with `status: queued` and run the task in the background (needs `store`). @default false */
    background: opt(z.boolean()),
    prompt: refused('stored prompt templates are not supported'),
    /** llama-orch extension: the admission lane. @default interactive */
    priority: opt(z.enum(['interactive', 'batch'])),
  })
  .meta({ id: 'ResponsesRequest' });
export type ResponsesRequest = z.infer<typeof ResponsesRequestSchema>;

/** A response object (non-streamed answer; also inside `response.created` … `response.completed` events). */
export const ResponseObjectSchema = z
  .looseObject({
    id: z.string(),
    object: z.literal('response'),
    created_at: z.int(),
    /**
     * `completed`, or `incomplete` (`incomplete_details.reason: max_output_tokens`); `in_progress`
     * while streaming or running; a background one `queued` first, and `failed` (`error` says why) or
     * `cancelled` when it ends so.
     */
    status: z.enum(['queued', 'in_progress', 'completed', 'incomplete', 'failed', 'cancelled']),
    model: z.string(),
    /** `message` items (`output_text` parts), `function_call` items, `reasoning` items. */
    output: z.array(Json),
    usage: z
      .looseObject({
        input_tokens: z.int().nonnegative(),
        input_tokens_details: z.looseObject({ cached_tokens: z.int().nonnegative() }),
        output_tokens: z.int().nonnegative(),
        output_tokens_details: z.looseObject({ reasoning_tokens: z.int().nonnegative() }),
        total_tokens: z.int().nonnegative(),
      })
      .nullable(),
  })
  .meta({ id: 'Response' });
export type ResponseObject = z.infer<typeof ResponseObjectSchema>;

/** `GET /v1/responses/{id}`: the response object, or (`stream=true`, a background response) its events. */
export const ResponseRetrieveQuerySchema = z
  .looseObject({
    /** Stream the response's events (a background response only), live while it runs. */
    stream: z.enum(['true', 'false']).optional(),
    /** With `stream`: only the events after this `sequence_number` (a reconnect resumes). */
    starting_after: z.coerce.number().int().min(-1).max(1e9).optional(),
  })
  .meta({ id: 'ResponseRetrieveQuery' });
export type ResponseRetrieveQuery = z.infer<typeof ResponseRetrieveQuerySchema>;

/** `GET /v1/responses/{id}/input_items`: a page of the items the request sent. */
export const ResponseInputItemsQuerySchema = z
  .looseObject({
    /** Items per page, 1–100. @default 20 */
    limit: z.coerce.number().int().min(1).max(100).default(20),
    /** `asc`: in the order sent; `desc`: the last first. @default desc (as OpenAI's API) */
    order: z.enum(['asc', 'desc']).default('desc'),
    /** An item id: the page starts after it (in `order`). */
    after: z.string().max(256).optional(),
    /** An item id: the page ends before it (in `order`). */
    before: z.string().max(256).optional(),
  })
  .meta({ id: 'ResponseInputItemsQuery' });
export type ResponseInputItemsQuery = z.infer<typeof ResponseInputItemsQuerySchema>;

/** A page of a response's input items (OpenAI's list shape; each item has an `id`). */
export const ResponseInputItemListSchema = z
  .strictObject({
    object: z.literal('list'),
    /** `message` items (`input_text`/`output_text` parts), `function_call` and `function_call_output` items. */
    data: z.array(Json),
    /** Ids of the page's first and last item; null on an empty page. */
    first_id: z.string().nullable(),
    last_id: z.string().nullable(),
    has_more: z.boolean(),
  })
  .meta({ id: 'ResponseInputItemList' });
export type ResponseInputItemList = z.infer<typeof ResponseInputItemListSchema>;

/** `DELETE /v1/responses/{id}`. */
export const ResponseDeletedSchema = z
  .strictObject({ id: z.string(), object: z.literal('response'), deleted: z.literal(true) })
  .meta({ id: 'ResponseDeleted' });
export type ResponseDeleted = z.infer<typeof ResponseDeletedSchema>;
