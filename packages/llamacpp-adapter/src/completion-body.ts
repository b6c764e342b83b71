import { toolName, type ChatMessage, type DispatchRequest, type Sampling } from '@llama-orch/contracts';

/**
 * Sampling temperature sent when a request is not greedy and names none: llama-server's own
 * default (`--temp 0.8`), written out so a body means the same on any engine configuration.
 */
export const DEFAULT_TEMPERATURE = 0.8;

/** The fields of a dispatch that shape any engine request. */
type GenerationInput = Pick<DispatchRequest, 'max_tokens'> &
  Partial<Pick<DispatchRequest, 'seed' | 'greedy' | 'temperature' | 'sampling' | 'cache_prompt'>>;

/** What {@link toCompletionBody} needs: a prompt and the generation fields. */
export type CompletionInput = GenerationInput & { prompt: string };

/** What {@link toChatBody} needs: the conversation and the generation fields. */
export type ChatInput = GenerationInput & { messages: ChatMessage[] };

/** Body of llama-server's native `POST /completion`, exactly as this adapter sends it. */
export interface CompletionBody {
  prompt: string;
  n_predict: number;
  stream: true;
  cache_prompt: boolean;
  seed?: number;
  temperature: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  repeat_penalty?: number;
  logit_bias?: Record<string, number>;
  stop?: string | string[];
  /** The engine's grammar from a JSON schema (`{}` = any object). */
  json_schema?: Record<string, unknown>;
  /** Top alternatives returned per generated token (`completion_probabilities`). */
  n_probs?: number;
}

/** Body of llama-server's `POST /v1/chat/completions` (OpenAI's names), exactly as this adapter sends it. */
export interface ChatBody extends Omit<Sampling, 'temperature'> {
  messages: ChatMessage[];
  max_tokens: number;
  stream: true;
  /** Asks for the final `choices: []` chunk with `usage` (and `timings`), the source of the end event. */
  stream_options: { include_usage: true };
  cache_prompt: boolean;
  seed?: number;
  temperature: number;
}

/** Sampling fields both routes take under the same name, in the order they are written. */
const SHARED_FIELDS = [
  'top_p',
  'top_k',
  'min_p',
  'presence_penalty',
  'frequency_penalty',
  'repeat_penalty',
  'logit_bias',
  'stop',
] as const;

/** Sampling fields only the chat route understands; the OpenAI layer there maps them itself. */
const CHAT_ONLY_FIELDS = ['response_format', 'logprobs', 'top_logprobs', 'tools', 'tool_choice'] as const;

/** `greedy` wins over any temperature (0 is greedy in llama.cpp); then `sampling`, then the older field. */
function temperatureOf(req: GenerationInput): number {
  if (req.greedy === true) return 0;
  return req.sampling?.temperature ?? req.temperature ?? DEFAULT_TEMPERATURE;
}

function pick<K extends keyof Sampling>(
  sampling: Sampling | undefined,
  keys: readonly K[],
): Partial<Pick<Sampling, K>> {
  const out: Partial<Pick<Sampling, K>> = {};
  if (sampling === undefined) return out;
  for (const k of keys) if (sampling[k] !== undefined) out[k] = sampling[k];
  return out;
}

/**
 * `response_format` in `/completion`'s terms: that route ignores `response_format` and takes the
 * grammar as `json_schema` (an empty schema means any object, as `json_object` does).
 */
function jsonSchemaOf(sampling: Sampling | undefined): Record<string, unknown> | undefined {
  const f = sampling?.response_format;
  if (f === undefined || f.type === 'text') return undefined;
  if (f.type === 'json_object') return f.schema ?? {};
  return f.json_schema.schema;
}

/**
 * Maps a dispatch to the `/completion` body. Key order and values are part of the contract
 * (`.specs/40-llamacpp-adapter.md`): the e2e suite sends the identical body straight to the engine
 * and compares bytes, so a dispatch without sampling gives exactly the six fields it always had.
 *
 * - `cache_prompt` as the dispatch says (false unless given): upstream's determinism tests pin it
 *   off (reference §6); a cached prefix can change logits of the first generated token.
 * - `seed` only when given; absent means the engine's default (random unless `--seed`).
 * - Sampling fields keep their names; `response_format` becomes `json_schema`; `logprobs` becomes
 *   `n_probs` (`top_logprobs`, at least 1). `tools`/`tool_choice` have no meaning without a chat
 *   template and are not sent.
 */
export function toCompletionBody(req: CompletionInput): CompletionBody {
  const s = req.sampling;
  const jsonSchema = jsonSchemaOf(s);
  return {
    prompt: req.prompt,
    n_predict: req.max_tokens,
    stream: true,
    cache_prompt: req.cache_prompt ?? false,
    ...(req.seed !== undefined ? { seed: req.seed } : {}),
    temperature: temperatureOf(req),
    ...pick(s, SHARED_FIELDS),
    ...(jsonSchema !== undefined ? { json_schema: jsonSchema } : {}),
    ...(s?.logprobs === true ? { n_probs: Math.max(1, s.top_logprobs ?? 1) } : {}),
  };
}

/**
 * Maps a chat dispatch to the `/v1/chat/completions` body: the messages as given (the engine
 * renders them with the model's template), streaming with the usage chunk, and every sampling
 * field under OpenAI's name (the engine's OpenAI layer reads `top_k`, `min_p`, `repeat_penalty`
 * and `cache_prompt` too). Same rules as {@link toCompletionBody} for `greedy`, `seed` and
 * `cache_prompt`; fixed key order.
 */
export function toChatBody(req: ChatInput): ChatBody {
  const s = req.sampling;
  return {
    messages: req.messages,
    max_tokens: req.max_tokens,
    stream: true,
    stream_options: { include_usage: true },
    cache_prompt: req.cache_prompt ?? false,
    ...(req.seed !== undefined ? { seed: req.seed } : {}),
    temperature: temperatureOf(req),
    ...pick(s, SHARED_FIELDS),
    ...pick(s, CHAT_ONLY_FIELDS),
    ...namedChoice(s),
  };
}

/**
 * A named `tool_choice` in the engine's terms: llama-server reads only `none`/`auto`/`required`
 * (an object is taken as `auto`), so the call is required over that one tool. Nothing for any
 * other choice.
 */
function namedChoice(s: Sampling | undefined): Pick<Sampling, 'tools' | 'tool_choice'> {
  const choice = s?.tool_choice;
  if (typeof choice !== 'object') return {};
  return { tools: (s?.tools ?? []).filter((t) => toolName(t) === choice.function.name), tool_choice: 'required' };
}
