import type { ResponsesRequest } from '@llama-orch/contracts';

/**
 * Response objects of the Responses door, built from what a chat task produced: the engine's one
 * chat answer (not streamed) or the items the stream encoder collected. Output items are those
 * llama-server's own `/v1/responses` makes (a `reasoning` item for `reasoning_content`, a `message`
 * item with one `output_text` part when the content is not empty, a `function_call` item per tool
 * call); the envelope is OpenAI's, echoing the request's settings. A generation cut by
 * `max_output_tokens` is `status: incomplete` with `incomplete_details.reason: max_output_tokens`,
 * as OpenAI says it (llama-server says `completed`).
 */

export interface ResponseIdentity {
  /** `resp_<task id>`. */
  readonly id: string;
  /** Unix seconds: admission. */
  readonly createdAt: number;
  /** The model name as requested. */
  readonly model: string;
  readonly request: ResponsesRequest;
  /** The task id: the message and reasoning items are `msg_<task id>`, `rs_<task id>`. */
  readonly taskId: string;
  /**
   * Set for a stored response (`store` not false): the object says `store: true` and `background`,
   * and a task that ends cancelled or failed says so (`status: cancelled`/`failed`, `error`).
   * Absent: the stateless response, exactly as before stored responses.
   */
  readonly stored?: { readonly background: boolean } | undefined;
  /** The `previous_response_id` it continues. */
  readonly previousResponseId?: string | undefined;
}

export type Status = 'queued' | 'in_progress' | 'completed' | 'incomplete' | 'failed' | 'cancelled';

/** The statuses a response never leaves. */
export function isFinalStatus(status: unknown): boolean {
  return status === 'completed' || status === 'incomplete' || status === 'failed' || status === 'cancelled';
}

/** A failed response's `error` (OpenAI's `{code, message}`). */
export interface ResponseError {
  readonly code: string;
  readonly message: string;
}

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export function responsesUsage(promptTokens: number, cachedTokens: number, outputTokens: number): ResponsesUsage {
  return {
    input_tokens: promptTokens,
    input_tokens_details: { cached_tokens: cachedTokens },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: promptTokens + outputTokens,
  };
}

/** `length` → incomplete; anything else → completed. */
export function statusOf(finishReason: unknown): Status {
  return finishReason === 'length' ? 'incomplete' : 'completed';
}

/** The response object around `output`. */
export function responseEnvelope(
  who: ResponseIdentity,
  status: Status,
  output: unknown[],
  usage: ResponsesUsage | null,
  error: ResponseError | null = null,
): Record<string, unknown> {
  const r = who.request;
  const stored = who.stored;
  return {
    id: who.id,
    object: 'response',
    created_at: who.createdAt,
    status,
    ...(stored === undefined ? {} : { background: stored.background }),
    error,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: r.instructions ?? null,
    max_output_tokens: r.max_output_tokens ?? null,
    metadata: r.metadata ?? {},
    model: who.model,
    output,
    parallel_tool_calls: false,
    previous_response_id: who.previousResponseId ?? null,
    store: stored !== undefined,
    temperature: r.temperature ?? null,
    text: { format: r.text?.format ?? { type: 'text' } },
    tool_choice: r.tool_choice ?? 'auto',
    tools: r.tools ?? [],
    top_p: r.top_p ?? null,
    truncation: 'disabled',
    usage,
    user: r.user ?? null,
  };
}

export function messageItem(
  id: string,
  status: 'in_progress' | 'completed',
  text: string | undefined,
): Record<string, unknown> {
  const content = text === undefined ? [] : [outputText(text)];
  return { id, type: 'message', status, role: 'assistant', content };
}

export function outputText(text: string): Record<string, unknown> {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

export function functionCallItem(
  callId: string,
  name: string,
  args: string,
  status: 'in_progress' | 'completed',
): Record<string, unknown> {
  return { id: `fc_${callId}`, type: 'function_call', status, arguments: args, call_id: callId, name };
}

export function reasoningItem(
  id: string,
  text: string | undefined,
  status: 'in_progress' | 'completed',
): Record<string, unknown> {
  return {
    id,
    type: 'reasoning',
    summary: [],
    content: text === undefined ? [] : [{ type: 'reasoning_text', text }],
    status,
  };
}

interface ChatAnswer {
  choices?: Array<{
    finish_reason?: unknown;
    message?: { content?: unknown; reasoning_content?: unknown; tool_calls?: unknown };
  }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } };
}

/** A non-streamed response from the engine's one chat answer. */
export function responseFromChat(body: Record<string, unknown>, who: ResponseIdentity): Record<string, unknown> {
  const answer = body as ChatAnswer;
  const choice = answer.choices?.[0];
  const message = choice?.message ?? {};
  const output: Record<string, unknown>[] = [];
  if (typeof message.reasoning_content === 'string' && message.reasoning_content !== '')
    output.push(reasoningItem(`rs_${who.taskId}`, message.reasoning_content, 'completed'));
  if (typeof message.content === 'string' && message.content !== '')
    output.push(messageItem(`msg_${who.taskId}`, 'completed', message.content));
  if (Array.isArray(message.tool_calls)) {
    for (const call of message.tool_calls as Array<{ id?: string; function?: { name?: string; arguments?: string } }>) {
      output.push(
        functionCallItem(call.id ?? '', call.function?.name ?? '', call.function?.arguments ?? '', 'completed'),
      );
    }
  }
  const u = answer.usage ?? {};
  return responseEnvelope(
    who,
    statusOf(choice?.finish_reason),
    output,
    responsesUsage(u.prompt_tokens ?? 0, u.prompt_tokens_details?.cached_tokens ?? 0, u.completion_tokens ?? 0),
  );
}
