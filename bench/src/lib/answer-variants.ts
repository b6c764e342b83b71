import { request, type Dispatcher } from 'undici';
import { UnexpectedResponseError } from '../errors.js';
import { CpuMeter } from './relay-variants.js';
import { rounded, summarize, type Summary } from './stats.js';

/** One non-streamed answer as the client saw it (times: performance.now(), ms). */
export interface TimedAnswer {
  sentAt: number;
  /** The whole body read. */
  endAt: number;
  /** The answer's text (`message.content` / `text`), to check every path got the same. */
  text: string;
  completionTokens: number;
}

/**
 * One way of asking for a non-streamed answer in the relay benchmark (the engine directly, two
 * nginx hops, the /v1 door): its answers, and the CPU its processes spent inside its own rounds.
 */
export class AnswerVariant extends CpuMeter {
  readonly answers: TimedAnswer[] = [];

  /** Request → whole body, ms. */
  latency(): Summary {
    return summarize(this.answers.map((a) => a.endAt - a.sentAt));
  }

  /** CPU ms per request, by process and in total (NaN without processes). */
  cpuMsPerRequest(): Record<string, number> {
    return this.cpuPer(this.answers.length, 1e3);
  }

  details(): Record<string, unknown> {
    return {
      latency_ms: rounded(this.latency()),
      answers: this.answers.length,
      completion_tokens: this.answers[0]?.completionTokens,
      cpu_ms_per_request: Object.fromEntries(
        Object.entries(this.cpuMsPerRequest()).map(([k, v]) => [k, Math.round(v * 1000) / 1000]),
      ),
    };
  }
}

/**
 * Added latency of a variant over the direct one: p50 and p99 differences, and the median of the
 * per-round differences (`pairedP50`: both answered in the same round, one after the other, so the
 * engine's own drift over the run, a few ms on a shared host, cancels out).
 */
export function answerAddedOver(
  v: AnswerVariant,
  direct: AnswerVariant,
): { p50: number; p99: number; pairedP50: number } {
  const a = v.latency();
  const d = direct.latency();
  const n = Math.min(v.answers.length, direct.answers.length);
  const paired = Array.from({ length: n }, (_, k) => {
    const x = v.answers[k] as TimedAnswer;
    const y = direct.answers[k] as TimedAnswer;
    return x.endAt - x.sentAt - (y.endAt - y.sentAt);
  });
  return { p50: a.p50 - d.p50, p99: a.p99 - d.p99, pairedP50: summarize(paired).p50 };
}

/**
 * The engine body pool-managerd's adapter sends for a non-streamed door request with temperature 0
 * and a seed (llamacpp-adapter `answerRequestOf`; the door asks for the prompt cache): what the
 * direct and nginx variants send, so every path makes the engine do the same work.
 */
export function engineAnswerBody(
  kind: 'chat' | 'completion',
  content: string,
  maxTokens: number,
  seed: number,
): Record<string, unknown> {
  if (kind === 'chat')
    return {
      messages: [{ role: 'user', content }],
      max_tokens: maxTokens,
      stream: false,
      cache_prompt: true,
      seed,
      temperature: 0,
    };
  return { prompt: content, n_predict: maxTokens, stream: false, cache_prompt: true, seed, temperature: 0 };
}

/** One JSON `POST` read to its end, timed (ms, `performance.now()`); anything but a 200 throws. */
export async function timedPost(
  url: string,
  body: Record<string, unknown>,
  dispatcher: Dispatcher,
  opts: { token?: string; reset?: boolean },
): Promise<{ sentAt: number; endAt: number; text: string }> {
  const sentAt = performance.now();
  const res = await request(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(opts.token !== undefined ? { authorization: `Bearer ${opts.token}` } : {}),
    },
    body: JSON.stringify(body),
    dispatcher,
    reset: opts.reset ?? false,
  });
  const text = await res.body.text();
  const endAt = performance.now();
  if (res.statusCode !== 200)
    throw new UnexpectedResponseError(`POST ${url} answered ${res.statusCode}: ${text.slice(0, 500)}`);
  return { sentAt, endAt, text };
}

/** The OpenAI route of a kind. */
export const ANSWER_PATH = { chat: '/v1/chat/completions', completion: '/v1/completions' } as const;

/**
 * One non-streamed `POST <baseUrl><path>`: the engine itself, a proxy in front of it, or
 * orchestratord's door (with `token`). Ends when the whole body was read.
 */
export async function answerGeneration(
  baseUrl: string,
  kind: 'chat' | 'completion',
  body: Record<string, unknown>,
  dispatcher: Dispatcher,
  opts: { token?: string; reset?: boolean } = {},
): Promise<TimedAnswer> {
  const { sentAt, endAt, text } = await timedPost(`${baseUrl}${ANSWER_PATH[kind]}`, body, dispatcher, opts);
  const json = JSON.parse(text) as {
    choices?: Array<{ text?: string; message?: { content?: string | null } }>;
    usage?: { completion_tokens?: number };
  };
  const choice = json.choices?.[0];
  return {
    sentAt,
    endAt,
    text: choice?.message?.content ?? choice?.text ?? '',
    completionTokens: json.usage?.completion_tokens ?? 0,
  };
}
