import { randomUUID } from 'node:crypto';
import { request, type Dispatcher } from 'undici';
import { SseParser } from './sse.js';

/** What one flood client saw of its task, times in ms on the run's clock (`performance.now() − t0`). */
export interface FloodRecord {
  readonly task_id: string;
  readonly sent_at: number;
  /** Response headers arrived (admission decided). */
  responded_at?: number;
  status?: number;
  /** 200: admitted; the `started` frame's prediction. */
  predicted_start_ms?: number;
  first_token_at?: number;
  /** Terminal frame time (`end` or `error`). */
  ended_at?: number;
  /** `end` (normal), `canceled`, or the `error` frame's / refusal's code. */
  outcome?: string;
  tokens?: number;
  /** A refusal's message (DEADLINE_UNMET carries the prediction). */
  message?: string;
  /** Parsed from a DEADLINE_UNMET message: predicted start / end, ms. */
  refused_start_ms?: number;
  refused_end_ms?: number;
  /** Transport failure (connection refused or reset, timeout). */
  transport_error?: string;
}

export interface FloodClientOptions {
  readonly url: string;
  readonly token: string;
  readonly model: string;
  readonly prompt: string;
  readonly maxTokens: number;
  readonly deadlineMs: number;
  readonly dispatcher: Dispatcher;
  readonly now: () => number;
}

/** Reads "predicted start in N ms" and, when present, "end in N ms" from a DEADLINE_UNMET message (both predictors' wording). */
export function parseRefusalPrediction(message: string): { start?: number; end?: number } {
  const start = /predicted start in (\d+) ms/.exec(message)?.[1];
  const end = /end in (\d+) ms/.exec(message)?.[1];
  return {
    ...(start !== undefined ? { start: Number(start) } : {}),
    ...(end !== undefined ? { end: Number(end) } : {}),
  };
}

/** One client: POST /v2/tasks with `Accept: text/event-stream` (admission and stream in one request), read to the terminal frame. */
export async function floodClient(o: FloodClientOptions): Promise<FloodRecord> {
  const rec: FloodRecord = { task_id: randomUUID(), sent_at: o.now() };
  try {
    const res = await request(`${o.url}/v2/tasks`, {
      method: 'POST',
      dispatcher: o.dispatcher,
      headers: { authorization: `Bearer ${o.token}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({
        task_id: rec.task_id,
        model_ref: o.model,
        prompt: o.prompt,
        max_tokens: o.maxTokens,
        deadline_ms: o.deadlineMs,
        priority: 'interactive',
      }),
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    rec.responded_at = o.now();
    rec.status = res.statusCode;
    if (res.statusCode !== 200) {
      const text = await res.body.text();
      try {
        const env = JSON.parse(text) as { code?: string; message?: string };
        rec.outcome = env.code ?? `HTTP_${res.statusCode}`;
        rec.message = env.message;
        if (env.code === 'DEADLINE_UNMET' && env.message !== undefined) {
          const p = parseRefusalPrediction(env.message);
          if (p.start !== undefined) rec.refused_start_ms = p.start;
          if (p.end !== undefined) rec.refused_end_ms = p.end;
        }
      } catch {
        rec.outcome = `HTTP_${res.statusCode}`;
      }
      return rec;
    }
    const parser = new SseParser();
    res.body.setEncoding('utf8');
    for await (const chunk of res.body as AsyncIterable<string>) {
      for (const f of parser.feed(chunk)) {
        if (f.event === 'token') {
          rec.first_token_at ??= o.now();
        } else if (f.event === 'started') {
          rec.predicted_start_ms = (JSON.parse(f.data) as { predicted_start_ms: number }).predicted_start_ms;
        } else if (f.event === 'end' || f.event === 'error') {
          rec.ended_at = o.now();
          const data = JSON.parse(f.data) as { tokens_out?: number; canceled?: boolean; code?: string };
          rec.outcome = f.event === 'error' ? (data.code ?? 'error') : data.canceled === true ? 'canceled' : 'end';
          if (data.tokens_out !== undefined) rec.tokens = data.tokens_out;
        }
      }
    }
  } catch (err) {
    rec.transport_error = (err as Error).message;
  }
  return rec;
}
