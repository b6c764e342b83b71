import { ApiError, type ApiClient } from './api.js';
import { readSse } from './sse.js';

export interface ChatRequest {
  /** Any name the cluster serves the model under (alias, ref or catalog id). */
  model: string;
  prompt: string;
  max_tokens: number;
}

export interface ChatResult {
  text: string;
  /** `stop`, `length`, … from the last chunk that had one. */
  finish_reason: string | undefined;
  /** From the usage chunk (`stream_options.include_usage`). */
  completion_tokens: number | undefined;
}

/** The stream broke off before `data: [DONE]`: the reply is incomplete and must not look finished. */
export class StreamCutError extends Error {
  override readonly name = 'StreamCutError';
}

interface ChunkShape {
  error?: { message?: unknown; code?: unknown };
  choices?: Array<{ delta?: { content?: unknown }; finish_reason?: unknown }>;
  usage?: { completion_tokens?: unknown } | null;
}

/**
 * The playground's request: one user message to `POST /v1/chat/completions` with `stream: true`,
 * through orchestratord's queue and placement like any client. Calls `onText` with each piece of
 * content as it arrives; resolves at `data: [DONE]`. Rejects with the server's error (an ApiError
 * for a refused request or a `data: {error}` frame mid-stream), StreamCutError when the stream
 * ends without [DONE], or the abort reason when `signal` fires (the Stop button).
 */
export async function streamChat(
  api: ApiClient,
  req: ChatRequest,
  onText: (piece: string) => void,
  signal?: AbortSignal,
): Promise<ChatResult> {
  const res = await api.request('/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({
      model: req.model,
      messages: [{ role: 'user', content: req.prompt }],
      max_tokens: req.max_tokens,
      stream: true,
      stream_options: { include_usage: true },
    }),
    ...(signal ? { signal } : {}),
  });
  if (res.body === null) throw new StreamCutError('the reply has no body');
  const result: ChatResult = { text: '', finish_reason: undefined, completion_tokens: undefined };
  let done = false;
  await readSse(res.body, {
    onEvent: ({ data }) => {
      if (done) return;
      if (data === '[DONE]') {
        done = true;
        return;
      }
      const chunk = JSON.parse(data) as ChunkShape;
      if (chunk.error) {
        const code = typeof chunk.error.code === 'string' ? chunk.error.code : undefined;
        throw new ApiError(
          res.status,
          code,
          typeof chunk.error.message === 'string' ? chunk.error.message : 'the stream failed',
        );
      }
      const choice = chunk.choices?.[0];
      if (typeof choice?.delta?.content === 'string' && choice.delta.content !== '') {
        result.text += choice.delta.content;
        onText(choice.delta.content);
      }
      if (typeof choice?.finish_reason === 'string') result.finish_reason = choice.finish_reason;
      if (typeof chunk.usage?.completion_tokens === 'number') result.completion_tokens = chunk.usage.completion_tokens;
    },
  });
  if (!done) throw new StreamCutError('the stream ended before [DONE]');
  return result;
}
