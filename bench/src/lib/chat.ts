import { request, type Dispatcher } from 'undici';
import { UnexpectedResponseError } from '../errors.js';
import { SseParser } from './sse.js';

/** One message of an OpenAI chat conversation. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** One streamed `/v1/chat/completions` turn as the client saw it (times: performance.now(), ms). */
export interface ChatTurn {
  sentAt: number;
  /** First chunk carrying content (or the finish reason, for an answer without text). */
  firstTokenAt: number;
  endAt: number;
  text: string;
  finishReason: string | undefined;
  promptTokens: number;
  completionTokens: number;
  /** `usage.prompt_tokens_details.cached_tokens`: prompt tokens the engine took from its cache. */
  cachedTokens: number;
}

interface ChunkView {
  choices?: Array<{ delta?: { content?: string | null }; finish_reason?: string | null }>;
  usage?: {
    prompt_tokens: number;
    completion_tokens: number;
    prompt_tokens_details?: { cached_tokens?: number };
  } | null;
}

/** Reads an OpenAI chat stream's `data:` chunks (until `[DONE]`) into a {@link ChatTurn}. */
export class ChatStreamReader {
  readonly #parser = new SseParser();
  readonly #pieces: string[] = [];
  #firstTokenAt = Number.NaN;
  #finishReason: string | undefined;
  #usage: ChunkView['usage'];
  #done = false;

  /** Feeds a chunk that arrived at `now`; true once `[DONE]` was read. */
  feed(text: string, now: number): boolean {
    for (const f of this.#parser.feed(text)) {
      if (f.data === '[DONE]') {
        this.#done = true;
        continue;
      }
      const chunk = JSON.parse(f.data) as ChunkView;
      if (chunk.usage) this.#usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (choice === undefined) continue;
      const content = choice.delta?.content;
      if (typeof content === 'string' && content !== '') this.#pieces.push(content);
      if (choice.finish_reason) this.#finishReason = choice.finish_reason;
      if (Number.isNaN(this.#firstTokenAt) && ((typeof content === 'string' && content !== '') || choice.finish_reason))
        this.#firstTokenAt = now;
    }
    return this.#done;
  }

  result(sentAt: number, endAt: number): ChatTurn {
    if (!this.#done) throw new UnexpectedResponseError('chat stream ended without data: [DONE]');
    if (!this.#usage)
      throw new UnexpectedResponseError('chat stream carried no usage chunk (stream_options.include_usage)');
    return {
      sentAt,
      firstTokenAt: this.#firstTokenAt,
      endAt,
      text: this.#pieces.join(''),
      finishReason: this.#finishReason,
      promptTokens: this.#usage.prompt_tokens,
      completionTokens: this.#usage.completion_tokens,
      cachedTokens: this.#usage.prompt_tokens_details?.cached_tokens ?? 0,
    };
  }
}

export interface ChatTurnRequest {
  orchUrl: string;
  token: string;
  model: string;
  messages: readonly ChatMessage[];
  maxTokens: number;
  seed: number;
  /** OpenAI `user`: the conversation key orchestratord keeps affinity by; absent = no session (placement alone decides). */
  user?: string | undefined;
  correlationId: string;
}

/** Sends one streaming `POST /v1/chat/completions` (with usage) and times it. */
export async function chatTurn(r: ChatTurnRequest, dispatcher: Dispatcher): Promise<ChatTurn> {
  const sentAt = performance.now();
  const res = await request(`${r.orchUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      authorization: `Bearer ${r.token}`,
      'x-correlation-id': r.correlationId,
    },
    body: JSON.stringify({
      model: r.model,
      messages: r.messages,
      max_tokens: r.maxTokens,
      seed: r.seed,
      user: r.user,
      stream: true,
      stream_options: { include_usage: true },
    }),
    dispatcher,
  });
  if (res.statusCode !== 200)
    throw new UnexpectedResponseError(
      `POST /v1/chat/completions answered ${res.statusCode}: ${(await res.body.text()).slice(0, 500)}`,
    );
  const reader = new ChatStreamReader();
  for await (const chunk of res.body) reader.feed((chunk as Buffer).toString('utf8'), performance.now());
  return reader.result(sentAt, performance.now());
}

const WORDS = (
  'river stone lantern harbor meadow copper violet engine signal orbit canyon maple thunder velvet compass ' +
  'garden silver ember glacier falcon pepper quartz willow anchor bakery candle dolphin feather harvest island ' +
  'jungle kettle ladder marble needle oyster pillow quiver rocket saddle timber umbrella valley wagon yogurt zebra ' +
  'almond blanket cactus desert elbow fossil guitar hammer insect jacket kitten lemon mirror napkin orange parrot ' +
  'puzzle rabbit scarf tunnel unicorn vessel walnut yellow button cereal dragon eagle forest galaxy helmet igloo ' +
  'jigsaw koala lobster magnet nectar octopus pebble quilt radish spider tomato uniform vortex whistle'
).split(' ');

/** Deterministic PRNG (mulberry32): the same seed gives the same conversation text every run. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A user message of `count` words drawn with `rand`: unique per conversation, so no two share a cache prefix. */
export function userText(rand: () => number, count: number): string {
  const out: string[] = [];
  for (let i = 0; i < count; i++) out.push(WORDS[Math.floor(rand() * WORDS.length)] as string);
  return `Please summarise these notes: ${out.join(' ')}.`;
}

/**
 * Of a turn's prior conversation (the previous turn's prompt plus its answer), the share the engine
 * served from its cache: cached ÷ prior, at most 1 (the cache may also hold part of the new message's
 * template header, which is not prior conversation).
 */
export function priorCachedShare(
  cachedTokens: number,
  previous: { promptTokens: number; completionTokens: number },
): number {
  const prior = previous.promptTokens + previous.completionTokens;
  return prior === 0 ? 0 : Math.min(1, cachedTokens / prior);
}
