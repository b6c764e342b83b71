import { request, type Dispatcher } from 'undici';
import { toChatBody, toCompletionBody, type ChatInput, type CompletionInput } from './completion-body.js';
import { CompletionAbortedError, EngineProtocolError, EngineUnreachableError, WorkerResetError } from './errors.js';
import type { FinishReason } from './stream-events.js';

/**
 * One non-streamed answer from llama-server's OpenAI routes (reference §4.3/4.4 with
 * `stream: false`): the engine generates the whole answer and sends it as one JSON body, so
 * nothing crosses the wire per token. What the /v1 door's non-streamed requests run on.
 */

/** What to ask for: a chat (`/v1/chat/completions`) or a text completion (`/v1/completions`). */
export type AnswerInput = ({ workload: 'chat' } & ChatInput) | ({ workload: 'completion' } & CompletionInput);

/** The figures of an answer, read from its `usage`, `timings` and finish reason. */
export interface AnswerFigures {
  /** `usage.completion_tokens`. */
  tokens_out: number;
  /** `timings.predicted_ms` (0 when the engine sent no timings). */
  decode_ms: number;
  /** `limit` for `length`, else `eos` (the OpenAI routes do not tell a stop word from EOS). */
  stop_type: 'eos' | 'limit';
  finish_reason: FinishReason;
  /** `usage.prompt_tokens`. */
  prompt_tokens: number;
  /** `usage.prompt_tokens_details.cached_tokens`, else `timings.cache_n`, when the engine says. */
  cached_tokens?: number;
}

/** The engine's answer: its body text as it came, the same body parsed, and its figures. */
export interface EngineAnswer {
  readonly text: string;
  readonly body: Record<string, unknown>;
  readonly figures: AnswerFigures;
}

/** The engine path and body of an answer: the streaming bodies of completion-body.ts with `stream: false`. */
export function answerRequestOf(input: AnswerInput): { path: string; body: Record<string, unknown> } {
  if (input.workload === 'chat') {
    // Same fields, order and sampling rules as the streamed chat, without the usage-chunk option.
    const { stream_options: _usageChunk, ...body } = toChatBody(input);
    return { path: '/v1/chat/completions', body: { ...body, stream: false } };
  }
  // The OpenAI completions route reads /completion's native fields (n_predict, json_schema,
  // n_probs) too, so the streamed body serves unchanged apart from `stream`.
  return { path: '/v1/completions', body: { ...toCompletionBody(input), stream: false } };
}

type Loose = Record<string, unknown>;

function isRecord(v: unknown): v is Loose {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function count(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 0;
}

/**
 * The figures of an OpenAI answer body, checked by hand: exactly one choice with a known finish
 * reason, `usage` with token counts, `timings.predicted_ms` when there are timings; undefined for
 * anything else. Only the members the figures come from are looked at: a schema parse would copy
 * the whole body, logprobs included (performance notes: answers checked by hand).
 */
export function answerFigures(json: unknown): AnswerFigures | undefined {
  if (!isRecord(json) || 'error' in json) return undefined;
  const choices = json.choices;
  if (!Array.isArray(choices) || choices.length !== 1) return undefined;
  const choice: unknown = choices[0];
  if (!isRecord(choice) || !(isRecord(choice.message) || typeof choice.text === 'string')) return undefined;
  const reason = choice.finish_reason;
  if (reason !== 'stop' && reason !== 'length' && reason !== 'tool_calls') return undefined;
  const usage = json.usage;
  if (!isRecord(usage) || !count(usage.completion_tokens) || !count(usage.prompt_tokens)) return undefined;
  const timings = json.timings;
  let decode = 0;
  let cacheN: unknown;
  if (timings !== undefined) {
    if (!isRecord(timings) || typeof timings.predicted_ms !== 'number' || !(timings.predicted_ms >= 0))
      return undefined;
    decode = timings.predicted_ms;
    cacheN = timings.cache_n;
  }
  const details = usage.prompt_tokens_details;
  const cached =
    isRecord(details) && count(details.cached_tokens) ? details.cached_tokens : count(cacheN) ? cacheN : undefined;
  const figures: AnswerFigures = {
    tokens_out: usage.completion_tokens,
    decode_ms: decode,
    stop_type: reason === 'length' ? 'limit' : 'eos',
    finish_reason: reason,
    prompt_tokens: usage.prompt_tokens,
  };
  if (cached !== undefined) figures.cached_tokens = cached;
  return figures;
}

/** Reads an answer body; throws {@link EngineProtocolError} for one that is not an answer. */
export function readAnswer(text: string, url: string): EngineAnswer {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new EngineProtocolError(
      'llama-server answered with a body that is not JSON',
      { url, body: text.slice(0, 200) },
      { cause: err },
    );
  }
  const figures = answerFigures(json);
  if (figures === undefined)
    throw new EngineProtocolError('llama-server answered with a body of unknown shape', {
      url,
      body: text.slice(0, 200),
    });
  return { text, body: json as Loose, figures };
}

/** What {@link requestAnswer} needs of the client. */
export interface AnswerTransport {
  dispatcher: Dispatcher;
  baseUrl: string;
  headers: Record<string, string>;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  /** The error for a non-200 answer (the engine's JSON error, reference §4.9). */
  statusError(status: number, text: string, path: string): Error;
}

const REFUSED = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** Whether the request never reached the engine (no connection): its error or a cause carries a connect-failure code. */
function neverConnected(err: unknown): boolean {
  for (
    let e: unknown = err, depth = 0;
    e !== undefined && e !== null && depth < 4;
    e = (e as { cause?: unknown }).cause, depth++
  ) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && REFUSED.has(code)) return true;
  }
  return false;
}

/**
 * POSTs one answer request and reads the whole body, on a socket the dispatcher may keep for the
 * next answer (llama-server closes its connection after a stream, not after an answer). Rejects with
 * {@link EngineUnreachableError} (no connection), the `statusError` of a non-200 answer,
 * {@link WorkerResetError} (the connection broke after the request went out: the engine died
 * while generating), {@link EngineProtocolError} (not an answer) or {@link CompletionAbortedError}
 * (signal). Aborting closes the socket, which is llama-server's cancel; for a non-streamed request
 * the engine notices it within its 1 s poll (reference §5).
 */
export async function requestAnswer(
  t: AnswerTransport,
  input: AnswerInput,
  signal?: AbortSignal,
): Promise<EngineAnswer> {
  const { path, body } = answerRequestOf(input);
  return readAnswer(await postForText(t, path, body, signal), t.baseUrl);
}

/** POSTs `body` to `path` and returns the 200 body's text; the errors of {@link requestAnswer} but the shape check. */
export async function postForText(
  t: AnswerTransport,
  path: string,
  body: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<string> {
  const url = t.baseUrl;
  let status: number;
  let text: string;
  try {
    const res = await request(`${url}${path}`, {
      method: 'POST',
      dispatcher: t.dispatcher,
      headers: t.headers,
      body: JSON.stringify(body),
      headersTimeout: t.headersTimeoutMs,
      bodyTimeout: t.bodyTimeoutMs,
      ...(signal !== undefined ? { signal } : {}),
    });
    status = res.statusCode;
    text = await res.body.text();
  } catch (err) {
    if (signal?.aborted === true) throw new CompletionAbortedError({ url }, { cause: err });
    if (neverConnected(err))
      throw new EngineUnreachableError(
        `llama-server at ${url} unreachable: ${(err as Error).message}`,
        { url },
        { cause: err },
      );
    throw new WorkerResetError(
      `llama-server connection broke before its answer: ${(err as Error).message}`,
      { url },
      { cause: err },
    );
  }
  if (status !== 200) throw t.statusError(status, text, path);
  return text;
}
