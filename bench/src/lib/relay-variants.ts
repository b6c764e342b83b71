import { request, type Dispatcher } from 'undici';
import { UnexpectedResponseError } from '../errors.js';
import { rounded, summarize, type Summary } from './stats.js';
import { taskBody, timeGeneration, type TaskOptions, type TimedGeneration } from './streams.js';

/** A process whose CPU a variant is charged for. */
export interface MeteredProcess {
  readonly name: string;
  /** CPU seconds so far (user + system, /proc stat). */
  cpuSeconds(): number;
}

/**
 * The CPU a variant's processes spent inside its own rounds only: each request is metered from
 * just before it is sent until the pause after it, so the variants of one interleaved run do not
 * charge each other.
 */
export class CpuMeter {
  readonly #cpu = new Map<string, number>();
  #before: number[] = [];

  constructor(
    readonly name: string,
    readonly processes: readonly MeteredProcess[],
  ) {
    for (const p of processes) this.#cpu.set(p.name, 0);
  }

  /** Just before the request. */
  meterStart(): void {
    this.#before = this.processes.map((p) => p.cpuSeconds());
  }

  /** After the request and the pause that lets its processes finish; `counted` = a measured round. */
  meterStop(counted: boolean): void {
    if (!counted) return;
    this.processes.forEach((p, k) => {
      this.#cpu.set(p.name, (this.#cpu.get(p.name) ?? 0) + p.cpuSeconds() - (this.#before[k] as number));
    });
  }

  /** CPU per unit of work (`scale`: 1e6 for µs, 1e3 for ms), by process and in total (NaN without processes). */
  protected cpuPer(units: number, scale: number): Record<string, number> {
    const out: Record<string, number> = {};
    let total = 0;
    for (const [name, s] of this.#cpu) {
      out[name] = (s * scale) / units;
      total += s;
    }
    out.total = this.processes.length === 0 ? Number.NaN : (total * scale) / units;
    return out;
  }
}

/** One way of reaching the engine in the relay benchmark (direct, the daemons, nginx …): its generations and their CPU. */
export class RelayVariant extends CpuMeter {
  readonly generations: TimedGeneration[] = [];

  get tokens(): number {
    return this.generations.reduce((a, g) => a + g.tokenAt.length, 0);
  }

  /** CPU µs per token this variant delivered, by process and in total (NaN without processes). */
  cpuUsPerToken(): Record<string, number> {
    return this.cpuPer(this.tokens, 1e6);
  }

  ttft(): Summary {
    return summarize(this.generations.map((g) => (g.tokenAt[0] as number) - g.sentAt));
  }

  itl(): Summary {
    return summarize(this.generations.flatMap(gaps));
  }

  /** Decode rate as the client sees it: token frames after the first over the time they took. */
  rate(): Summary {
    return summarize(this.generations.map(decodeRate));
  }

  /** End-to-end rate: token frames over send → last token. */
  e2eRate(): Summary {
    return summarize(this.generations.map(e2eRate));
  }

  /** Everything kept in the JSON for this variant. */
  details(): Record<string, unknown> {
    return {
      ttft_ms: rounded(this.ttft()),
      inter_token_ms: rounded(this.itl(), 4),
      decode_tokens_per_s: rounded(this.rate(), 1),
      end_to_end_tokens_per_s: rounded(this.e2eRate(), 1),
      tokens: this.tokens,
      cpu_us_per_token: Object.fromEntries(
        Object.entries(this.cpuUsPerToken()).map(([k, v]) => [k, Math.round(v * 10) / 10]),
      ),
    };
  }
}

export function gaps(g: TimedGeneration): number[] {
  const out: number[] = [];
  for (let i = 1; i < g.tokenAt.length; i++) out.push((g.tokenAt[i] as number) - (g.tokenAt[i - 1] as number));
  return out;
}

export function decodeRate(g: TimedGeneration): number {
  const n = g.tokenAt.length;
  if (n < 2) return Number.NaN;
  return (n - 1) / (((g.tokenAt[n - 1] as number) - (g.tokenAt[0] as number)) / 1000);
}

export function e2eRate(g: TimedGeneration): number {
  const n = g.tokenAt.length;
  return n / (((g.tokenAt[n - 1] as number) - g.sentAt) / 1000);
}

/**
 * Figures of one variant against the direct engine: added TTFT p50/p99, added inter-token p50/p99,
 * tokens/s ratio (medians).
 */
export function addedOver(
  v: RelayVariant,
  direct: RelayVariant,
): { ttftP50: number; ttftP99: number; itlP50: number; itlP99: number; tpsRatio: number } {
  const t = v.ttft();
  const td = direct.ttft();
  const i = v.itl();
  const id = direct.itl();
  return {
    ttftP50: t.p50 - td.p50,
    ttftP99: t.p99 - td.p99,
    itlP50: i.p50 - id.p50,
    itlP99: i.p99 - id.p99,
    tpsRatio: v.rate().p50 / direct.rate().p50,
  };
}

/**
 * The single-request `/v2` stream: POST /v2/tasks with `Accept: text/event-stream`, answered 200
 * with the task's SSE frames (no 202 and no second request). Token times as {@link relayGeneration}.
 */
export async function singleRequestGeneration(o: TaskOptions, dispatcher: Dispatcher): Promise<TimedGeneration> {
  const sentAt = performance.now();
  const res = await request(`${o.orchUrl}/v2/tasks`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${o.token}` },
    body: JSON.stringify(taskBody(o)),
    dispatcher,
  });
  if (res.statusCode !== 200)
    throw new UnexpectedResponseError(
      `POST /v2/tasks (event stream) answered ${res.statusCode}: ${await res.body.text()}`,
    );
  return timeGeneration(
    res.body,
    sentAt,
    (f) => {
      if (f.event === 'token') return { token: String((JSON.parse(f.data) as { t: unknown }).t) };
      return { end: f.event === 'end' || f.event === 'error' };
    },
    'single-request stream',
  );
}

/**
 * The `/v1/chat/completions` body pool-managerd's adapter sends the engine for a chat turn with
 * temperature 0 and a seed (`toChatBody`; the door asks for the prompt cache): what the direct and
 * nginx chat variants send, so all three make the engine do the same work.
 */
export function engineChatBody(content: string, maxTokens: number, seed: number): Record<string, unknown> {
  return {
    messages: [{ role: 'user', content }],
    max_tokens: maxTokens,
    stream: true,
    stream_options: { include_usage: true },
    cache_prompt: true,
    seed,
    temperature: 0,
  };
}

/** The same chat turn as orchestratord's `/v1` door takes it (the door names the model; it asks for the prompt cache itself). */
export function doorChatBody(model: string, content: string, maxTokens: number, seed: number): Record<string, unknown> {
  const { cache_prompt: _engineOnly, ...body } = engineChatBody(content, maxTokens, seed);
  return { model, ...body };
}

/**
 * One streaming `POST <baseUrl>/v1/chat/completions`: the engine itself, a proxy in front of it, or
 * orchestratord's `/v1` door (with `token`). Token times are the arrival of chunks whose delta has
 * content; the generation ends at `data: [DONE]`. `reset` as in {@link directGeneration}.
 */
export async function chatGeneration(
  baseUrl: string,
  body: Record<string, unknown>,
  dispatcher: Dispatcher,
  opts: { token?: string; reset?: boolean } = {},
): Promise<TimedGeneration> {
  const sentAt = performance.now();
  const res = await request(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      ...(opts.token !== undefined ? { authorization: `Bearer ${opts.token}` } : {}),
    },
    body: JSON.stringify(body),
    dispatcher,
    reset: opts.reset ?? false,
  });
  if (res.statusCode !== 200)
    throw new UnexpectedResponseError(
      `POST ${baseUrl}/v1/chat/completions answered ${res.statusCode}: ${(await res.body.text()).slice(0, 500)}`,
    );
  return timeGeneration(
    res.body,
    sentAt,
    (f) => {
      if (f.data === '[DONE]') return { end: true };
      const content = (JSON.parse(f.data) as { choices?: Array<{ delta?: { content?: string | null } }> }).choices?.[0]
        ?.delta?.content;
      return typeof content === 'string' && content !== '' ? { token: content } : undefined;
    },
    'chat stream (data: [DONE])',
  );
}
