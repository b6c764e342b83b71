import type { AnthropicMessage } from '@llama-orch/contracts';

/**
 * A non-streamed Anthropic message from the engine's one OpenAI chat answer (the `answer` path:
 * pool-managerd passes the engine's body up as one `result` event), shaped as llama-server's own
 * `/v1/messages` shapes it: a `thinking` block for `reasoning_content`, a `text` block for non-empty
 * content, a `tool_use` block per tool call (its arguments parsed; `{}` when they are not JSON),
 * `stop_reason` from the finish reason, usage with the cached prompt tokens apart.
 */

type AnthropicStopReason = NonNullable<AnthropicMessage['stop_reason']>;

/** `tool_calls` → `tool_use`, `length` → `max_tokens`, anything else (`stop`) → `end_turn`. */
export function stopReasonOf(finishReason: unknown): AnthropicStopReason {
  if (finishReason === 'tool_calls') return 'tool_use';
  if (finishReason === 'length') return 'max_tokens';
  return 'end_turn';
}

/** Anthropic's usage: `input_tokens` are the prompt tokens not read from the prompt cache. */
export function anthropicUsage(
  promptTokens: number,
  cachedTokens: number,
  outputTokens: number,
): AnthropicMessage['usage'] {
  return {
    cache_read_input_tokens: cachedTokens,
    input_tokens: Math.max(0, promptTokens - cachedTokens),
    output_tokens: outputTokens,
  };
}

interface ChatAnswer {
  choices?: Array<{
    finish_reason?: unknown;
    message?: { content?: unknown; reasoning_content?: unknown; tool_calls?: unknown };
  }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } };
}

interface ToolCall {
  id?: string;
  function?: { name?: string; arguments?: string };
}

function parseInput(args: string | undefined): unknown {
  try {
    const v: unknown = JSON.parse(args ?? '');
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? v : {};
  } catch {
    // The engine's own route answers `{}` for arguments that are not a JSON object; so does the door.
    return {};
  }
}

export function anthropicMessage(body: Record<string, unknown>, who: { id: string; model: string }): AnthropicMessage {
  const answer = body as ChatAnswer;
  const choice = answer.choices?.[0];
  const message = choice?.message ?? {};
  const content: Record<string, unknown>[] = [];
  if (typeof message.reasoning_content === 'string' && message.reasoning_content !== '')
    content.push({ type: 'thinking', thinking: message.reasoning_content, signature: '' });
  if (typeof message.content === 'string' && message.content !== '')
    content.push({ type: 'text', text: message.content });
  if (Array.isArray(message.tool_calls)) {
    for (const call of message.tool_calls as ToolCall[])
      content.push({
        type: 'tool_use',
        id: call.id ?? '',
        name: call.function?.name ?? '',
        input: parseInput(call.function?.arguments),
      });
  }
  const usage = answer.usage ?? {};
  return {
    id: who.id,
    type: 'message',
    role: 'assistant',
    content,
    model: who.model,
    stop_reason: stopReasonOf(choice?.finish_reason),
    stop_sequence: null,
    usage: anthropicUsage(
      usage.prompt_tokens ?? 0,
      usage.prompt_tokens_details?.cached_tokens ?? 0,
      usage.completion_tokens ?? 0,
    ),
  };
}
