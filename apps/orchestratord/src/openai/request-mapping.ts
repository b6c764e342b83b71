import {
  ChatCompletionRequestSchema,
  CompletionRequestSchema,
  SAMPLING_FIELDS,
  TaskRequestSchema,
  type ChatCompletionRequest,
  type CompletionRequest,
  type TaskRequestBody,
  type TaskRequestInput,
} from '@llama-orch/contracts';
import type { z } from 'zod';
import { InvalidParamsError } from '../errors.js';

/**
 * The /v1 door's requests as the one internal task model: an OpenAI body becomes the same
 * `POST /v2/tasks` body (then `resolveTaskRequest` fills ids and limits), validated by the same
 * schema, so both doors admit, queue, place and dispatch tasks identically.
 */

/** What a /v1 route needs to answer besides the task: how to render it. */
export interface OpenAiCall {
  readonly kind: 'chat' | 'completion';
  /** The model name as the client sent it (`model` of every response chunk). */
  readonly model: string;
  readonly stream: boolean;
  /** `stream_options.include_usage`: a last `choices: []` chunk with `usage`. */
  readonly includeUsage: boolean;
  readonly task: TaskRequestBody;
}

type Issue = z.core.$ZodIssue;

/** OpenAI's `param` for an issue path: `messages.0.content`, `temperature` (sampling fields are top-level there). */
function paramOf(path: readonly PropertyKey[]): string | undefined {
  const parts = path[0] === 'sampling' ? path.slice(1) : path[0] === 'model_ref' ? ['model', ...path.slice(1)] : path;
  return parts.length === 0 ? undefined : parts.map(String).join('.');
}

export function invalid(issue: Issue | undefined): InvalidParamsError {
  const param = issue === undefined ? undefined : paramOf(issue.path);
  const message = issue?.message ?? 'invalid request';
  return new InvalidParamsError(
    param === undefined ? `body: ${message}` : `${param}: ${message}`,
    param === undefined ? {} : { param },
  );
}

export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new InvalidParamsError('body: expected a JSON object');
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw invalid(parsed.error.issues[0]);
  return parsed.data;
}

/** The fields both requests share: model, lane, limits, seed, session. */
function common(body: ChatCompletionRequest | CompletionRequest, sessionId: string | undefined): TaskRequestInput {
  const task: TaskRequestInput = {
    model_ref: body.model,
    // `flex` is OpenAI's cheaper, slower tier: the batch lane here.
    priority: body.priority === 'batch' || body.service_tier === 'flex' ? 'batch' : 'interactive',
  };
  if (sessionId !== undefined) task.session_id = sessionId;
  if (body.seed !== undefined && body.seed !== null) task.seed = body.seed;
  return task;
}

/** Copies the sampling fields that are set (null = not set, as OpenAI treats it). */
function sampling(body: Record<string, unknown>, fields: readonly string[]): Record<string, unknown> | undefined {
  let out: Record<string, unknown> | undefined;
  for (const f of fields) {
    const v = body[f];
    if (v !== undefined && v !== null) (out ??= {})[f] = v;
  }
  return out;
}

/** The assembled body through the /v2 schema: one set of rules for both doors. */
function finish(
  kind: 'chat' | 'completion',
  body: ChatCompletionRequest | CompletionRequest,
  input: TaskRequestInput,
): OpenAiCall {
  const parsed = TaskRequestSchema.safeParse(input);
  if (!parsed.success) throw invalid(parsed.error.issues[0]);
  return {
    kind,
    model: body.model,
    stream: body.stream === true,
    includeUsage: body.stream_options?.include_usage === true,
    task: parsed.data,
  };
}

/** `POST /v1/chat/completions` → a chat task (messages rendered by the engine with the model's template). */
export function chatCall(raw: unknown, sessionId: string | undefined): OpenAiCall {
  const body = parseBody(ChatCompletionRequestSchema, raw);
  const task = common(body, sessionId);
  task.workload = 'chat';
  task.messages = body.messages;
  const maxTokens = body.max_completion_tokens ?? body.max_tokens;
  if (maxTokens !== undefined && maxTokens !== null) task.max_tokens = maxTokens;
  const s = sampling(body, SAMPLING_FIELDS);
  if (s !== undefined) task.sampling = s;
  return finish('chat', body, task);
}

/** Sampling fields of a text completion (tools and chat-only fields are not forwarded). */
const COMPLETION_SAMPLING = SAMPLING_FIELDS.filter(
  (f) => f !== 'tools' && f !== 'tool_choice' && f !== 'logprobs' && f !== 'top_logprobs',
);

/** `POST /v1/completions` → a completion task (the prompt sent to the engine verbatim). */
export function completionCall(raw: unknown, sessionId: string | undefined): OpenAiCall {
  const body = parseBody(CompletionRequestSchema, raw);
  const task = common(body, sessionId);
  task.workload = 'completion';
  task.prompt = typeof body.prompt === 'string' ? body.prompt : body.prompt[0];
  if (body.max_tokens !== undefined && body.max_tokens !== null) task.max_tokens = body.max_tokens;
  const s = sampling(body, COMPLETION_SAMPLING) ?? {};
  // The legacy API's `logprobs` is a count of alternatives per position, not a switch.
  const lp = (body as Record<string, unknown>).logprobs;
  if (typeof lp === 'number') {
    s.logprobs = true;
    s.top_logprobs = lp;
  } else if (lp !== undefined && lp !== null) {
    throw new InvalidParamsError('logprobs: expected a number of alternatives (0..20)', { param: 'logprobs' });
  }
  if (Object.keys(s).length > 0) task.sampling = s;
  return finish('completion', body, task);
}
