import {
  AnthropicCountTokensRequestSchema,
  AnthropicMessagesRequestSchema,
  TaskRequestSchema,
  type AnthropicCountTokensRequest,
  type AnthropicMessageParam,
  type ChatMessage,
  type TaskRequestBody,
  type TaskRequestInput,
} from '@llama-orch/contracts';
import type { z } from 'zod';
import { InvalidParamsError } from '../errors.js';

/**
 * Anthropic's Messages requests as the one internal task model: a chat task (`workload: chat`,
 * OpenAI messages the engine renders with the model's template), translated as llama-server's own
 * `/v1/messages` translates them (tools/server/server-chat.cpp), so that at a fixed seed the door
 * and the engine's route render the same prompt: `system` → a system message; text blocks kept as
 * content parts; `tool_use` blocks → the assistant's `tool_calls` (input as JSON text); `tool_result`
 * blocks → `role: tool` messages after their turn; `thinking` → `reasoning_content`; tools →
 * OpenAI function tools; `tool_choice` `auto`/`any`/`none` → `auto`/`required`/`none` and `tool` →
 * that named function; `stop_sequences` → `stop`.
 */

/** What the routes need besides the task. */
export interface MessagesCall {
  /** The model name as the client sent it (`model` of the answer). */
  readonly model: string;
  readonly stream: boolean;
  readonly task: TaskRequestBody;
}

function invalid(issue: z.core.$ZodIssue | undefined): InvalidParamsError {
  const path = issue?.path.map(String).join('.') ?? '';
  const param = path === '' ? undefined : path.replace(/^sampling\./, '').replace(/^model_ref/, 'model');
  const message = issue?.message ?? 'invalid request';
  return new InvalidParamsError(
    param === undefined ? `body: ${message}` : `${param}: ${message}`,
    param === undefined ? {} : { param },
  );
}

function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new InvalidParamsError('body: expected a JSON object');
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw invalid(parsed.error.issues[0]);
  return parsed.data;
}

function systemText(system: AnthropicCountTokensRequest['system']): string | undefined {
  if (system === undefined) return undefined;
  return typeof system === 'string' ? system : system.map((b) => b.text).join('');
}

/** One Anthropic message as the OpenAI messages it stands for (a user turn with tool results is several). */
function toChatMessages(msg: AnthropicMessageParam): ChatMessage[] {
  if (typeof msg.content === 'string') return [{ role: msg.role, content: msg.content }];
  const parts: Array<{ type: string; text: string }> = [];
  const toolCalls: Record<string, unknown>[] = [];
  const results: ChatMessage[] = [];
  let reasoning = '';
  for (const block of msg.content) {
    if (block.type === 'text') parts.push({ type: 'text', text: block.text });
    else if (block.type === 'thinking') reasoning += block.thinking;
    else if (block.type === 'tool_use')
      toolCalls.push({
        id: block.id,
        type: 'function',
        function: { name: block.name, arguments: JSON.stringify(block.input) },
      });
    else {
      const c = block.content;
      results.push({
        role: 'tool',
        tool_call_id: block.tool_use_id,
        content: c === undefined ? '' : typeof c === 'string' ? c : c.map((b) => b.text).join(''),
      });
    }
  }
  const out: ChatMessage[] = [];
  if (parts.length > 0 || toolCalls.length > 0 || reasoning !== '') {
    const m: ChatMessage = { role: msg.role, content: parts.length > 0 ? parts : '' };
    if (toolCalls.length > 0) m.tool_calls = toolCalls;
    if (reasoning !== '') m.reasoning_content = reasoning;
    out.push(m);
  }
  return [...out, ...results];
}

/** The conversation and tool fields both routes share, as task fields. */
function conversation(body: AnthropicCountTokensRequest, sessionId: string | undefined): TaskRequestInput {
  const messages: ChatMessage[] = [];
  const system = systemText(body.system);
  if (system !== undefined) messages.push({ role: 'system', content: system });
  for (const m of body.messages) messages.push(...toChatMessages(m));
  const task: TaskRequestInput = { model_ref: body.model, workload: 'chat', messages, priority: 'interactive' };
  if (sessionId !== undefined) task.session_id = sessionId;
  const sampling: Record<string, unknown> = {};
  if (body.tools !== undefined) {
    sampling.tools = body.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description ?? '', parameters: t.input_schema },
    }));
  }
  const choice = body.tool_choice;
  if (choice !== undefined) {
    if (choice.type === 'tool') {
      if (!(body.tools ?? []).some((t) => t.name === choice.name))
        throw new InvalidParamsError(`tool_choice.name: '${choice.name}' is not among tools`, {
          param: 'tool_choice.name',
        });
      sampling.tool_choice = { type: 'function', function: { name: choice.name } };
    } else sampling.tool_choice = choice.type === 'any' ? 'required' : choice.type;
  }
  if (Object.keys(sampling).length > 0) task.sampling = sampling;
  return task;
}

function finish(input: TaskRequestInput): TaskRequestBody {
  const parsed = TaskRequestSchema.safeParse(input);
  if (!parsed.success) throw invalid(parsed.error.issues[0]);
  return parsed.data;
}

/** `POST /v1/messages` → a chat task. */
export function messagesCall(raw: unknown, sessionId: string | undefined): MessagesCall {
  const body = parseBody(AnthropicMessagesRequestSchema, raw);
  const task = conversation(body, sessionId);
  task.max_tokens = body.max_tokens;
  const sampling = (task.sampling ?? {}) as Record<string, unknown>;
  if (body.temperature !== undefined) sampling.temperature = body.temperature;
  if (body.top_p !== undefined) sampling.top_p = body.top_p;
  if (body.top_k !== undefined) sampling.top_k = body.top_k;
  if (body.stop_sequences !== undefined) sampling.stop = body.stop_sequences;
  if (Object.keys(sampling).length > 0) task.sampling = sampling;
  return { model: body.model, stream: body.stream === true, task: finish(task) };
}

/**
 * `POST /v1/messages/count_tokens` → a one-token chat answer: the engine renders the conversation
 * (tools included) with the model's template and tokenizes it, and its `usage.prompt_tokens` is
 * the count, as llama-server's own count_tokens route computes it. It is queued and placed like any
 * task, so it counts with the tokenizer of a pool that serves the model.
 */
export function countTokensCall(raw: unknown, sessionId: string | undefined): MessagesCall {
  const body = parseBody(AnthropicCountTokensRequestSchema, raw);
  const task = conversation(body, sessionId);
  task.max_tokens = 1;
  return { model: body.model, stream: false, task: finish(task) };
}
