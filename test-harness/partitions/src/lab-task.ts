import { randomUUID } from 'node:crypto';
import { createParser } from 'eventsource-parser';
import { request } from 'undici';
import { LAB_MODEL_ALIAS } from './lab-daemons.js';

/** How a task's stream ended, as its client saw it. */
export interface TaskOutcome {
  /** `refused`: admission answered non-202; `no_terminal`: the body ended or broke without a terminal frame; `hung`: the client's bound passed. */
  kind: 'end' | 'error' | 'refused' | 'no_terminal' | 'hung';
  /** Admission status (202 when admitted). */
  status: number | undefined;
  /** Error code (error frame or refusal envelope). */
  code: string | undefined;
  /** Retry-After of a refusal. */
  retryAfter: string | undefined;
  tokens: number;
  /** Node of the `end` frame. */
  nodeId: string | undefined;
  admittedAt: number;
  firstTokenAt: number | undefined;
  endedAt: number;
}

/** A task followed from its admission to its terminal frame. */
export interface LiveTask {
  readonly id: string;
  /** Resolves at the first token frame (never, when the task ends without one). */
  readonly firstToken: Promise<void>;
  readonly done: Promise<TaskOutcome>;
  tokensSoFar(): number;
}

export interface TaskSpec {
  maxTokens: number;
  /** `pin` or `prefer` a pool; absent = auto. */
  pin?: string;
  prefer?: string;
  /** With `prefer`: whether other pools may serve when the preferred one cannot. @default false */
  fallback?: boolean;
  deadlineMs?: number;
  /** Client bound on the whole stream, ms. @default 120000 */
  timeoutMs?: number;
}

/**
 * POST /v2/tasks on `base`, then its SSE stream (`streams.sse`), reading to the end of the body.
 * Token frames must count up from 0 without gaps: a duplicate or lost frame rejects `done`.
 */
export function openTask(base: string, token: string, spec: TaskSpec): LiveTask {
  const id = randomUUID();
  const auth = { authorization: `Bearer ${token}` };
  let tokens = 0;
  let markFirst: () => void = () => undefined;
  const firstToken = new Promise<void>((resolve) => (markFirst = resolve));
  const body: Record<string, unknown> = {
    task_id: id,
    model_ref: LAB_MODEL_ALIAS,
    prompt: `Partition task ${id}: tell a long story about a lighthouse keeper.`,
    max_tokens: spec.maxTokens,
    deadline_ms: spec.deadlineMs ?? 120_000,
  };
  if (spec.pin !== undefined) body.placement = { mode: 'pin', pin_pool_id: spec.pin };
  if (spec.prefer !== undefined)
    body.placement = { mode: 'prefer', prefer_pools: [spec.prefer], allow_fallback: spec.fallback ?? false };
  const done = (async (): Promise<TaskOutcome> => {
    const out: TaskOutcome = {
      kind: 'no_terminal',
      status: undefined,
      code: undefined,
      retryAfter: undefined,
      tokens: 0,
      nodeId: undefined,
      admittedAt: Date.now(),
      firstTokenAt: undefined,
      endedAt: 0,
    };
    const res = await request(new URL('/v2/tasks', base), {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      headersTimeout: 15_000,
      bodyTimeout: 15_000,
    });
    const text = await res.body.text();
    out.status = res.statusCode;
    if (res.statusCode !== 202) {
      out.kind = 'refused';
      out.code = (JSON.parse(text) as { code?: string }).code;
      const ra = res.headers['retry-after'];
      out.retryAfter = Array.isArray(ra) ? ra[0] : ra;
      out.endedAt = Date.now();
      return out;
    }
    out.admittedAt = Date.now();
    const sse = String((JSON.parse(text) as { streams: { sse: string } }).streams.sse);
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), spec.timeoutMs ?? 120_000);
    let terminal = false;
    let broken: string | undefined;
    const parser = createParser({
      onEvent: (e) => {
        const data = JSON.parse(e.data) as Record<string, unknown>;
        if (terminal) broken ??= `frame '${e.event}' after the terminal frame`;
        if (e.event === 'token') {
          if (data.i !== tokens)
            broken ??= `token frame i=${String(data.i)} where ${tokens} was due (duplicate or gap)`;
          tokens += 1;
          if (tokens === 1) {
            out.firstTokenAt = Date.now();
            markFirst();
          }
        } else if (e.event === 'end') {
          terminal = true;
          out.kind = 'end';
          out.nodeId = typeof data.node_id === 'string' ? data.node_id : undefined;
        } else if (e.event === 'error') {
          terminal = true;
          out.kind = 'error';
          out.code = typeof data.code === 'string' ? data.code : undefined;
        }
      },
    });
    try {
      const stream = await request(sse, {
        headers: auth,
        signal: controller.signal,
        headersTimeout: 15_000,
        bodyTimeout: 0,
      });
      const decoder = new TextDecoder();
      for await (const chunk of stream.body) parser.feed(decoder.decode(chunk as Buffer, { stream: true }));
    } catch (err) {
      if (controller.signal.aborted) out.kind = 'hung';
      else if (!terminal) out.code = (err as Error).message;
    } finally {
      clearTimeout(timer);
    }
    if (broken !== undefined) throw new Error(`task ${id}: ${broken}`);
    out.tokens = tokens;
    out.endedAt = Date.now();
    return out;
  })();
  return { id, firstToken, done, tokensSoFar: () => tokens };
}
