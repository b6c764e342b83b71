import { randomUUID } from 'node:crypto';
import { request, type Dispatcher } from 'undici';
import { UnexpectedResponseError } from '../errors.js';
import { SseParser, type SseFrame } from './sse.js';

/** Arrival times (performance.now(), ms) of one generation as a client saw it. */
export interface TimedGeneration {
  /** Just before the first request was sent. */
  sentAt: number;
  /** Arrival of each token frame (relay) / each event with non-empty `content` (direct). */
  tokenAt: number[];
  text: string;
  /** Terminal frame arrival. */
  endAt: number;
}

/** What one SSE frame of a generation carries: a token's text, the end, both or neither. */
export interface FrameReading {
  token?: string;
  end?: boolean;
}

/**
 * Reads a streamed response to its end as a {@link TimedGeneration}: every frame goes to `read`,
 * stamped with its chunk's arrival. `what` names the stream when its end never came.
 */
export async function timeGeneration(
  body: AsyncIterable<unknown>,
  sentAt: number,
  read: (f: SseFrame) => FrameReading | undefined,
  what: string,
): Promise<TimedGeneration> {
  const parser = new SseParser();
  const tokenAt: number[] = [];
  const pieces: string[] = [];
  let endAt = Number.NaN;
  for await (const chunk of body) {
    const now = performance.now();
    for (const f of parser.feed((chunk as Buffer).toString('utf8'))) {
      const r = read(f);
      if (r?.token !== undefined) {
        tokenAt.push(now);
        pieces.push(r.token);
      }
      if (r?.end === true) endAt = now;
    }
  }
  if (Number.isNaN(endAt)) throw new UnexpectedResponseError(`${what} ended without its terminal frame`);
  return { sentAt, tokenAt, text: pieces.join(''), endAt };
}

/**
 * The body pool-managerd's adapter sends for a strict task (`toCompletionBody` with greedy):
 * prompt, n_predict, stream, cache_prompt false, seed, temperature 0.
 */
export function directBody(prompt: string, maxTokens: number, seed: number): Record<string, unknown> {
  return { prompt, n_predict: maxTokens, stream: true, cache_prompt: false, seed, temperature: 0 };
}

/**
 * POST `<engine>/completion` straight to llama-server, like the adapter does (`reset: true`: the
 * engine closes the socket after a stream anyway, so every request connects; the adapter pays the
 * same). Token times are the arrival of events with non-empty `content` — what the adapter relays.
 * `reset: false` keeps the connection (a proxy in front of the engine, reached like orchestratord).
 */
export async function directGeneration(
  engineUrl: string,
  body: Record<string, unknown>,
  dispatcher: Dispatcher,
  signal?: AbortSignal,
  reset = true,
): Promise<TimedGeneration> {
  const sentAt = performance.now();
  const res = await request(`${engineUrl}/completion`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
    dispatcher,
    reset,
    ...(signal !== undefined ? { signal } : {}),
  });
  if (res.statusCode !== 200)
    throw new UnexpectedResponseError(`engine answered ${res.statusCode}: ${await res.body.text()}`);
  return timeGeneration(
    res.body,
    sentAt,
    (f) => {
      const ev = JSON.parse(f.data) as { content?: string; stop?: boolean };
      return { ...(ev.content !== undefined && ev.content !== '' ? { token: ev.content } : {}), end: ev.stop === true };
    },
    'engine stream (stop:true)',
  );
}

/**
 * POST `<pool-managerd>/v2/pools/{id}/completions` (the dispatch orchestratord sends: greedy, same
 * seed) and read its NDJSON token events: the pool-managerd hop alone, without orchestratord.
 */
export async function poolManagerdGeneration(
  pmUrl: string,
  poolId: string,
  token: string,
  body: { prompt: string; max_tokens: number; seed: number },
  dispatcher: Dispatcher,
): Promise<TimedGeneration> {
  const sentAt = performance.now();
  const res = await request(`${pmUrl}/v2/pools/${encodeURIComponent(poolId)}/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, accept: 'application/x-ndjson' },
    body: JSON.stringify({ task_id: randomUUID(), greedy: true, ...body }),
    dispatcher,
  });
  if (res.statusCode !== 200)
    throw new UnexpectedResponseError(`pool-managerd answered ${res.statusCode}: ${await res.body.text()}`);
  const tokenAt: number[] = [];
  const pieces: string[] = [];
  let endAt = Number.NaN;
  let buf = '';
  for await (const chunk of res.body) {
    const now = performance.now();
    buf += (chunk as Buffer).toString('utf8');
    let nl = buf.indexOf('\n');
    while (nl >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      nl = buf.indexOf('\n');
      if (line.trim() === '') continue;
      const ev = JSON.parse(line) as { type: string; t?: string };
      if (ev.type === 'token') {
        tokenAt.push(now);
        pieces.push(ev.t ?? '');
      } else {
        endAt = now;
      }
    }
  }
  if (Number.isNaN(endAt)) throw new UnexpectedResponseError('pool-managerd stream ended without end/error');
  return { sentAt, tokenAt, text: pieces.join(''), endAt };
}

export interface TaskOptions {
  orchUrl: string;
  token: string;
  model: string;
  prompt: string;
  maxTokens: number;
  seed?: number;
  determinism?: 'strict' | 'best_effort';
  deadlineMs?: number;
  placement?: Record<string, unknown>;
  priority?: 'interactive' | 'batch';
}

export function taskBody(o: TaskOptions, taskId: string = randomUUID()): Record<string, unknown> {
  return {
    task_id: taskId,
    session_id: randomUUID(),
    workload: 'completion',
    model_ref: o.model,
    engine: 'llamacpp',
    ctx: 0,
    priority: o.priority ?? 'interactive',
    ...(o.seed !== undefined ? { seed: o.seed } : {}),
    ...(o.determinism !== undefined ? { determinism: o.determinism } : {}),
    prompt: o.prompt,
    max_tokens: o.maxTokens,
    deadline_ms: o.deadlineMs ?? 120_000,
    ...(o.placement !== undefined ? { placement: o.placement } : {}),
  };
}

/** POST /v2/tasks; returns the SSE URL of the admitted task. */
export async function submitTask(
  o: TaskOptions,
  dispatcher: Dispatcher,
  taskId?: string,
): Promise<{ taskId: string; sse: string }> {
  const body = taskBody(o, taskId);
  const res = await request(`${o.orchUrl}/v2/tasks`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${o.token}` },
    body: JSON.stringify(body),
    dispatcher,
  });
  const text = await res.body.text();
  if (res.statusCode !== 202) throw new UnexpectedResponseError(`POST /v2/tasks answered ${res.statusCode}: ${text}`);
  const admission = JSON.parse(text) as { streams: { sse: string } };
  return { taskId: body.task_id as string, sse: admission.streams.sse };
}

export interface RelayFrame {
  event: string;
  data: Record<string, unknown>;
  at: number;
}

/**
 * Submits a task and opens its SSE stream right after the 202 (nothing in between), recording
 * arrival times. `onFrame` may return `'disconnect'` to drop the connection (client disconnect).
 */
export async function relayGeneration(
  o: TaskOptions,
  dispatcher: Dispatcher,
  onFrame?: (f: RelayFrame) => 'disconnect' | undefined,
): Promise<TimedGeneration & { frames: RelayFrame[]; taskId: string; disconnectedAt?: number }> {
  const sentAt = performance.now();
  const { taskId, sse } = await submitTask(o, dispatcher);
  const ac = new AbortController();
  const res = await request(sse, {
    method: 'GET',
    headers: { accept: 'text/event-stream', authorization: `Bearer ${o.token}` },
    dispatcher,
    signal: ac.signal,
  });
  if (res.statusCode !== 200)
    throw new UnexpectedResponseError(`GET ${sse} answered ${res.statusCode}: ${await res.body.text()}`);
  const parser = new SseParser();
  const frames: RelayFrame[] = [];
  const tokenAt: number[] = [];
  const pieces: string[] = [];
  let endAt = Number.NaN;
  try {
    for await (const chunk of res.body) {
      const now = performance.now();
      for (const f of parser.feed((chunk as Buffer).toString('utf8'))) {
        const frame: RelayFrame = { event: f.event, data: JSON.parse(f.data) as Record<string, unknown>, at: now };
        frames.push(frame);
        if (frame.event === 'token') {
          tokenAt.push(now);
          pieces.push(String(frame.data.t));
        }
        if (frame.event === 'end' || frame.event === 'error') endAt = now;
        if (onFrame?.(frame) === 'disconnect') {
          const disconnectedAt = performance.now();
          ac.abort();
          res.body.destroy();
          return { sentAt, tokenAt, text: pieces.join(''), endAt, frames, taskId, disconnectedAt };
        }
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  }
  if (Number.isNaN(endAt)) throw new UnexpectedResponseError(`task ${taskId}: stream closed without a terminal frame`);
  return { sentAt, tokenAt, text: pieces.join(''), endAt, frames, taskId };
}
