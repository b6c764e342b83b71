import {
  ResponsesRequestSchema,
  TaskRequestSchema,
  type ChatMessage,
  type ResponseInputItem,
  type ResponsesRequest,
  type TaskRequestBody,
  type TaskRequestInput,
} from '@llama-orch/contracts';
import type { z } from 'zod';
import { InvalidParamsError } from '../errors.js';
import { invalid } from '../openai/request-mapping.js';

/**
 * OpenAI Responses requests as the one internal task model: a chat task, translated as
 * llama-server's own `/v1/responses` translates them (tools/server/server-chat.cpp), so that the door
 * and the engine's route render the same prompt: `instructions` → a system message first; a string
 * `input` → one user message; message items → messages with text parts (`input_text`/`output_text`
 * → `text`), an assistant item after an assistant turn merged into it; a `function_call` item → a
 * tool call on the assistant turn (merged likewise); a `function_call_output` item → a `role: tool`
 * message; function tools → chat tools (`strict` true unless given); `max_output_tokens` →
 * `max_tokens`; `text.format` → `response_format`.
 */

/** What the route needs besides the task: the request's fields a response object echoes. */
export interface ResponsesCall {
  readonly model: string;
  readonly stream: boolean;
  readonly task: TaskRequestBody;
  readonly request: ResponsesRequest;
}

type Issue = z.core.$ZodIssue;

/**
 * The most specific issue under a union (`input` is a string or items; an item is one of three
 * kinds): the branch issue that reaches deepest, with the union's path before it, so a refusal
 * names `input.0.content.0.type` rather than `input`.
 */
function deepest(issue: Issue): Issue {
  if (issue.code !== 'invalid_union') return issue;
  let best: Issue = issue;
  let depth = 0;
  for (const branch of issue.errors)
    for (const sub of branch) {
      const d = deepest(sub);
      if (d.path.length > depth) {
        best = { ...d, path: [...issue.path, ...d.path] };
        depth = d.path.length;
      }
    }
  return best;
}

/**
 * The body of `POST /v1/responses`, validated: 400 naming the field at fault. `background` needs the
 * response stored (as OpenAI's API refuses it with `store: false`).
 */
export function parseResponsesRequest(raw: unknown): ResponsesRequest {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw new InvalidParamsError('body: expected a JSON object');
  const parsed = ResponsesRequestSchema.safeParse(raw);
  if (!parsed.success)
    throw invalid(parsed.error.issues[0] === undefined ? undefined : deepest(parsed.error.issues[0]));
  if (parsed.data.background === true && parsed.data.store === false)
    throw new InvalidParamsError('background: a background response must be stored: send store: true or leave it out', {
      param: 'background',
    });
  return parsed.data;
}

type Message = ChatMessage & { content?: unknown; tool_calls?: Record<string, unknown>[] };

function textParts(content: string | Array<{ text: string }>): Array<{ type: 'text'; text: string }> {
  return typeof content === 'string'
    ? [{ type: 'text', text: content }]
    : content.map((p) => ({ type: 'text', text: p.text }));
}

function toMessages(items: readonly ResponseInputItem[]): Message[] {
  const out: Message[] = [];
  for (const item of items) {
    const prev = out.at(-1);
    const mergeable = prev?.role === 'assistant' ? prev : undefined;
    if (item.type === 'function_call') {
      const call = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } };
      if (mergeable !== undefined) (mergeable.tool_calls ??= []).push(call);
      else out.push({ role: 'assistant', tool_calls: [call] });
    } else if (item.type === 'function_call_output') {
      out.push({
        role: 'tool',
        tool_call_id: item.call_id,
        content: typeof item.output === 'string' ? item.output : textParts(item.output),
      });
    } else {
      const message = item as Extract<ResponseInputItem, { role: string }>;
      const parts = textParts(message.content);
      if (message.role === 'assistant' && mergeable !== undefined) {
        mergeable.content = [
          ...(Array.isArray(mergeable.content) ? (mergeable.content as unknown[]) : []),
          ...parts,
        ] as Message['content'];
      } else out.push({ role: message.role, content: parts });
    }
  }
  return out;
}

/** What a stored or chained response adds to the request's own fields. */
export interface CallContext {
  /** The conversation before this request's input (`previous_response_id`'s), as input items. */
  readonly history?: readonly ResponseInputItem[] | undefined;
  /** The task id to use (a stored response's id is known before admission). */
  readonly taskId?: string | undefined;
}

/** The request's `input` as items (a string is one user message). */
export function inputItemsOf(input: ResponsesRequest['input']): ResponseInputItem[] {
  return typeof input === 'string' ? [{ role: 'user', content: input }] : input;
}

/**
 * `POST /v1/responses` → a chat task. With a `history` (the previous response's conversation and
 * output) the messages are this request's `instructions` (a previous response's instructions are not
 * carried over, as OpenAI's API says), the history, then `input`.
 */
export function responsesCall(
  body: ResponsesRequest,
  sessionId: string | undefined,
  context: CallContext = {},
): ResponsesCall {
  const messages: Message[] = [];
  if (body.instructions !== undefined && body.instructions !== null)
    messages.push({ role: 'system', content: body.instructions });
  const history = context.history ?? [];
  if (history.length === 0 && typeof body.input === 'string') messages.push({ role: 'user', content: body.input });
  else messages.push(...toMessages([...history, ...inputItemsOf(body.input)]));
  const task: TaskRequestInput = {
    model_ref: body.model,
    workload: 'chat',
    messages,
    priority: body.priority === 'batch' ? 'batch' : 'interactive',
  };
  if (sessionId !== undefined) task.session_id = sessionId;
  if (context.taskId !== undefined) task.task_id = context.taskId;
  if (body.max_output_tokens !== undefined && body.max_output_tokens !== null) task.max_tokens = body.max_output_tokens;
  const sampling: Record<string, unknown> = {};
  if (body.temperature !== undefined && body.temperature !== null) sampling.temperature = body.temperature;
  if (body.top_p !== undefined && body.top_p !== null) sampling.top_p = body.top_p;
  if (body.tools !== undefined && body.tools !== null && body.tools.length > 0) {
    sampling.tools = body.tools.map(({ type: _type, ...fn }) => ({
      type: 'function',
      function: { ...fn, strict: fn.strict ?? true },
    }));
  }
  const choice = body.tool_choice;
  if (choice !== undefined && choice !== null)
    sampling.tool_choice = typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } };
  const format = body.text?.format;
  if (format?.type === 'json_object') sampling.response_format = { type: 'json_object' };
  else if (format?.type === 'json_schema')
    sampling.response_format = {
      type: 'json_schema',
      json_schema: { name: format.name, schema: format.schema, strict: format.strict ?? false },
    };
  if (Object.keys(sampling).length > 0) task.sampling = sampling;
  const parsed = TaskRequestSchema.safeParse(task);
  if (!parsed.success) throw invalid(parsed.error.issues[0]);
  return { model: body.model, stream: body.stream === true, task: parsed.data, request: body };
}
