import { createParser } from 'eventsource-parser';
import { request } from 'undici';

export interface DirectChat {
  text: string;
  finishReason: string | undefined;
  completionTokens: number;
  promptTokens: number;
}

/**
 * Sends a streaming `/v1/chat/completions` request straight to a llama-server (the engine renders
 * the messages with the model's template, as it does for pool-managerd) and returns the content.
 */
export async function directChat(engineUrl: string, body: Record<string, unknown>): Promise<DirectChat> {
  const res = await request(new URL('/v1/chat/completions', engineUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json', connection: 'close' },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
  });
  if (res.statusCode !== 200) throw new Error(`engine answered ${res.statusCode}: ${await res.body.text()}`);
  const pieces: string[] = [];
  let finishReason: string | undefined;
  let usage: { prompt_tokens: number; completion_tokens: number } | undefined;
  let done = false;
  const parser = createParser({
    onEvent: (e) => {
      if (e.data === '[DONE]') {
        done = true;
        return;
      }
      const chunk = JSON.parse(e.data) as {
        choices?: Array<{ delta?: { content?: string | null }; finish_reason?: string | null }>;
        usage?: { prompt_tokens: number; completion_tokens: number };
      };
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (typeof choice?.delta?.content === 'string') pieces.push(choice.delta.content);
      if (choice?.finish_reason) finishReason = choice.finish_reason;
    },
  });
  const decoder = new TextDecoder();
  for await (const chunk of res.body) parser.feed(decoder.decode(chunk as Buffer, { stream: true }));
  if (!done || !usage) throw new Error('engine chat stream ended without usage and [DONE]');
  return {
    text: pieces.join(''),
    finishReason,
    completionTokens: usage.completion_tokens,
    promptTokens: usage.prompt_tokens,
  };
}
