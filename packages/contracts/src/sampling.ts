import { z } from 'zod';

/**
 * Generation controls shared by both doors: `/v1` takes them as top-level fields (OpenAI's names),
 * `/v2/tasks` under `sampling`. Validated at the door; pool-managerd forwards them to the engine
 * unchanged (llama-server reads the same names on `/completion` and `/v1/chat/completions`).
 */

const Json = z.record(z.string(), z.unknown());

/** A stop string or up to 16 of them; generation ends before the first one produced. */
export const StopSchema = z.union([z.string().min(1).max(512), z.array(z.string().min(1).max(512)).max(16)]);

/** Output shape enforced by the engine's grammar. */
export const ResponseFormatSchema = z
  .discriminatedUnion('type', [
    z.strictObject({ type: z.literal('text') }),
    /** Any JSON object; llama-server also takes an optional `schema` here. */
    z.strictObject({ type: z.literal('json_object'), schema: Json.optional() }),
    z.strictObject({
      type: z.literal('json_schema'),
      json_schema: z.looseObject({
        name: z.string().max(64).optional(),
        description: z.string().max(4096).optional(),
        /** The JSON Schema the output must match. */
        schema: Json,
        strict: z.boolean().nullable().optional(),
      }),
    }),
  ])
  .meta({ id: 'ResponseFormat' });
export type ResponseFormat = z.infer<typeof ResponseFormatSchema>;

/** A `tool_choice` naming the one function the model must call. */
export const NamedToolChoiceSchema = z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string().min(1) }) });
export type NamedToolChoice = z.infer<typeof NamedToolChoiceSchema>;

/** The function name of an OpenAI chat tool (`{type: 'function', function: {name}}`), if it has one. */
export function toolName(tool: Record<string, unknown>): string | undefined {
  const fn = tool.function;
  return typeof fn === 'object' && fn !== null && typeof (fn as { name?: unknown }).name === 'string' ? (fn as { name: string }).name : undefined;
}

/** Sampling and output controls. Absent fields take the engine's defaults. */
export const SamplingSchema = z
  .strictObject({
    /** 0 = greedy. */
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().min(0).max(1).optional(),
    /** 0 = off. */
    top_k: z.int().min(0).max(1000).optional(),
    min_p: z.number().min(0).max(1).optional(),
    presence_penalty: z.number().min(-2).max(2).optional(),
    frequency_penalty: z.number().min(-2).max(2).optional(),
    /** llama.cpp's repetition penalty; 1 = off. */
    repeat_penalty: z.number().min(0).max(10).optional(),
    /** Token id (as a string, OpenAI's form) → bias added to its logit, −100..100. */
    logit_bias: z.record(z.string().regex(/^\d+$/, 'logit_bias keys are token ids'), z.number().min(-100).max(100)).optional(),
    stop: StopSchema.optional(),
    response_format: ResponseFormatSchema.optional(),
    /** Return the chosen tokens' log probabilities (chat). */
    logprobs: z.boolean().optional(),
    /** With `logprobs`: alternatives per position, 0..20. */
    top_logprobs: z.int().min(0).max(20).optional(),
    /** Tools the model may call; passed to the engine unchanged (chat). */
    tools: z.array(Json).max(128).optional(),
    /**
     * `none`, `auto`, `required`, or one named function (`{type: 'function', function: {name}}`),
     * which must be among `tools`. The engine reads only the strings, so the adapter sends a named
     * choice as `required` over that one tool (chat).
     */
    tool_choice: z.union([z.enum(['none', 'auto', 'required']), NamedToolChoiceSchema]).optional(),
  })
  .refine((s) => s.top_logprobs === undefined || s.logprobs === true, {
    message: 'top_logprobs needs logprobs: true',
    path: ['top_logprobs'],
  })
  .refine((s) => typeof s.tool_choice !== 'object' || (s.tools ?? []).some((t) => toolName(t) === (s.tool_choice as NamedToolChoice).function.name), {
    message: 'names a function that is not among tools',
    path: ['tool_choice'],
  })
  .meta({ id: 'Sampling' });
export type Sampling = z.infer<typeof SamplingSchema>;

/** The sampling field names, for the /v1 door to pick them out of an OpenAI body. */
export const SAMPLING_FIELDS = Object.freeze([
  'temperature', 'top_p', 'top_k', 'min_p', 'presence_penalty', 'frequency_penalty', 'repeat_penalty', 'logit_bias', 'stop',
  'response_format', 'logprobs', 'top_logprobs', 'tools', 'tool_choice',
] as const satisfies ReadonlyArray<keyof Sampling>);

/** One chat message, as OpenAI clients send it; rendered by the engine with the model's template. */
export const ChatMessageSchema = z
  .looseObject({
    role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
    /** Text, or content parts (`{type: 'text', text}` …); null for an assistant turn with tool calls. */
    content: z.union([z.string(), z.array(z.looseObject({ type: z.string() })).max(256), z.null()]).optional(),
    name: z.string().max(256).optional(),
    tool_calls: z.array(Json).max(128).optional(),
    tool_call_id: z.string().max(256).optional(),
  })
  .meta({ id: 'ChatMessage' });
export type ChatMessage = z.infer<typeof ChatMessageSchema>;

/** A conversation: 1..1024 messages. */
export const ChatMessagesSchema = z.array(ChatMessageSchema).min(1).max(1024);
