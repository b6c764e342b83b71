import { setTimeout as sleep } from 'node:timers/promises';
import { createParser } from 'eventsource-parser';
import { request, type Dispatcher } from 'undici';
import { envelopeProblems } from './envelope.js';

/** What one chaos client does with its task. */
export interface TaskPlan {
  index: number;
  taskId: string;
  sessionId: string;
  priority: 'interactive' | 'batch';
  maxTokens: number;
  seed: number;
  /** `pin`/`prefer` a pool, or let the strategy decide. */
  placement: { mode: 'auto' } | { mode: 'pin' | 'prefer'; pool: string };
  /** `cancel` = POST …/cancel, `disconnect` = drop the SSE connection (= cancel). */
  action: 'none' | 'cancel' | 'disconnect';
  /** Tokens to see before acting (0 = right after `started`). */
  actAfterTokens: number;
}

export interface Frame {
  id: string | undefined;
  event: string;
  data: Record<string, unknown>;
  at: number;
}

/** Everything one client saw, for the invariant checks and the report. */
export interface TaskTrace {
  plan: TaskPlan;
  postedAt: number;
  /** `body`: the start of a refusal's answer. */
  admission: {
    status: number | undefined;
    code: string | undefined;
    problems: string[];
    error: string | undefined;
    body?: string;
    duplicateOfRetry?: boolean;
  };
  admitted: boolean;
  frames: Frame[];
  streamStatus: number | undefined;
  streamCode: string | undefined;
  streamError: string | undefined;
  /** The body ended without a terminal frame. */
  closedWithoutTerminal: boolean;
  /** Frames (of any kind) read after the first terminal frame. */
  framesAfterTerminal: number;
  /** No terminal and no close within the client-side timeout. */
  hung: boolean;
  /** `retries`: retriable 5xx answers sent again (with reconnects on). */
  cancel:
    | {
        status: number | undefined;
        error: string | undefined;
        sentAt: number;
        answeredAt: number | undefined;
        tokensBefore: number;
        retries?: number;
      }
    | undefined;
  disconnectedAt: number | undefined;
  /** Re-attach after a disconnect (with Last-Event-ID): what the rest of the frame log said. */
  resume:
    { status: number | undefined; code: string | undefined; error: string | undefined; frames: Frame[] } | undefined;
  /** With `reconnect`: why each broken stream was reopened (`closed`, `error`, `status_<n>`), in order. */
  reconnects: string[];
  endedAt: number;
}

export interface TaskClientContext {
  /** Current orchestratord base URL. */
  baseUrl: () => string;
  auth: Record<string, string>;
  dispatcher: Dispatcher;
  model: string;
  /** Client-side bound on the whole stream; past it the task counts as hung. */
  timeoutMs: number;
  /** Called as soon as the 202 arrives (fault triggers count admissions, not stream ends). */
  onAdmitted?: () => void;
  /**
   * Reopen a stream that broke before its terminal frame (closed, connection error, 5xx) with
   * `Last-Event-ID`, as an EventSource does, every `reconnect` ms, until the terminal frame, a 4xx
   * or the timeout. Off: a broken stream is the end of the trace (single orchestratord runs).
   */
  reconnectMs?: number;
}

function taskBody(plan: TaskPlan, model: string): Record<string, unknown> {
  const body: Record<string, unknown> = {
    task_id: plan.taskId,
    session_id: plan.sessionId,
    workload: 'completion',
    model_ref: model,
    engine: 'llamacpp',
    ctx: 0,
    priority: plan.priority,
    seed: plan.seed,
    prompt: `Chaos task ${plan.index}: tell a very short story about a lighthouse.`,
    max_tokens: plan.maxTokens,
    deadline_ms: 120_000,
  };
  if (plan.placement.mode === 'pin') body.placement = { mode: 'pin', pin_pool_id: plan.placement.pool };
  if (plan.placement.mode === 'prefer')
    body.placement = { mode: 'prefer', prefer_pools: [plan.placement.pool], allow_fallback: true };
  return body;
}

const TERMINAL = new Set(['end', 'error']);

/**
 * Reads one SSE response body: records every frame (also after a terminal one, which would be a
 * violation), calls `onFrame`, stops at the body's end or when `signal` aborts.
 */
async function readFrames(
  body: AsyncIterable<unknown> & { destroy(): void },
  sink: Frame[],
  signal: AbortSignal,
  onFrame: (f: Frame) => void,
): Promise<{ ended: 'closed' | 'aborted'; error: string | undefined }> {
  const parser = createParser({
    onEvent: (e) => {
      let data: Record<string, unknown>;
      try {
        data = JSON.parse(e.data) as Record<string, unknown>;
      } catch {
        data = { unparsable: e.data };
      }
      const f: Frame = { id: e.id, event: e.event ?? 'message', data, at: Date.now() };
      sink.push(f);
      onFrame(f);
    },
  });
  const decoder = new TextDecoder();
  try {
    for await (const chunk of body) parser.feed(decoder.decode(chunk as Buffer, { stream: true }));
    return { ended: 'closed', error: undefined };
  } catch (err) {
    if (signal.aborted) return { ended: 'aborted', error: undefined };
    return { ended: 'closed', error: (err as Error).message };
  }
}

/** Why a stream without its terminal frame is worth reopening; undefined when it is not (4xx, 2xx). */
function brokenBy(status: number | undefined, error: string | undefined, closed: boolean): string | undefined {
  if (status !== undefined && status !== 200) return status >= 500 ? `status_${status}` : undefined;
  if (error !== undefined) return 'error';
  return closed ? 'closed' : undefined;
}

async function errorCode(text: string): Promise<string | undefined> {
  try {
    const j = JSON.parse(text) as { code?: unknown };
    return typeof j.code === 'string' ? j.code : undefined;
  } catch {
    return undefined;
  }
}

/** Submits a task, follows its stream, cancels or disconnects as planned, never waits past the timeout. */
export async function runTask(plan: TaskPlan, ctx: TaskClientContext): Promise<TaskTrace> {
  const trace: TaskTrace = {
    plan,
    postedAt: Date.now(),
    admission: { status: undefined, code: undefined, problems: [], error: undefined },
    admitted: false,
    frames: [],
    streamStatus: undefined,
    streamCode: undefined,
    streamError: undefined,
    closedWithoutTerminal: false,
    framesAfterTerminal: 0,
    hung: false,
    cancel: undefined,
    disconnectedAt: undefined,
    resume: undefined,
    reconnects: [],
    endedAt: 0,
  };
  const base = ctx.baseUrl();
  let sseUrl: string;
  try {
    const res = await request(new URL('/v2/tasks', base), {
      method: 'POST',
      dispatcher: ctx.dispatcher,
      headers: { ...ctx.auth, 'content-type': 'application/json' },
      body: JSON.stringify(taskBody(plan, ctx.model)),
      headersTimeout: 15_000,
      bodyTimeout: 15_000,
    });
    const text = await res.body.text();
    trace.admission.status = res.statusCode;
    const code = res.statusCode === 202 ? undefined : await errorCode(text);
    if (
      ctx.reconnectMs !== undefined &&
      res.statusCode === 400 &&
      code === 'INVALID_PARAMS' &&
      text.includes('already exists')
    ) {
      // Our own task_id: a balancer retried the POST after the replica that admitted it died before
      // answering (HAProxy `retry-on empty-response`). It was admitted: follow it as an idempotent client would.
      trace.admission.duplicateOfRetry = true;
      sseUrl = new URL(`/v2/tasks/${encodeURIComponent(plan.taskId)}/events`, base).href;
    } else if (res.statusCode !== 202) {
      trace.admission.code = code;
      trace.admission.body = text.slice(0, 300);
      trace.admission.problems = envelopeProblems(res.statusCode, res.headers, text);
      trace.endedAt = Date.now();
      return trace;
    } else sseUrl = String((JSON.parse(text) as { streams: { sse: string } }).streams.sse);
  } catch (err) {
    trace.admission.error = (err as Error).message;
    trace.endedAt = Date.now();
    return trace;
  }
  trace.admitted = true;
  ctx.onAdmitted?.();

  const controller = new AbortController();
  const hangTimer = setTimeout(() => {
    trace.hung = true;
    controller.abort();
  }, ctx.timeoutMs);
  let cancelDone: Promise<void> = Promise.resolve();
  let tokens = 0;
  let acted = false;
  let terminalSeen = false;
  const act = (): void => {
    if (acted || plan.action === 'none' || terminalSeen) return;
    acted = true;
    if (plan.action === 'disconnect') {
      trace.disconnectedAt = Date.now();
      controller.abort();
      return;
    }
    const sentAt = Date.now();
    trace.cancel = { status: undefined, error: undefined, sentAt, answeredAt: undefined, tokensBefore: tokens };
    const c = trace.cancel;
    const send = (): Promise<void> =>
      request(new URL(`/v2/tasks/${plan.taskId}/cancel`, ctx.reconnectMs === undefined ? base : ctx.baseUrl()), {
        method: 'POST',
        dispatcher: ctx.dispatcher,
        headers: ctx.auth,
        headersTimeout: 15_000,
        bodyTimeout: 15_000,
      }).then(
        async (r) => {
          await r.body.text();
          c.status = r.statusCode;
          c.answeredAt = Date.now();
          // A cancel is idempotent: with reconnects on, a retriable 5xx (Redis down, the owner
          // replica restarting) is sent again after its Retry-After, as a client would.
          if (
            ctx.reconnectMs !== undefined &&
            r.statusCode >= 500 &&
            !controller.signal.aborted &&
            Date.now() - sentAt < ctx.timeoutMs / 2
          ) {
            c.retries = (c.retries ?? 0) + 1;
            await sleep(Math.max(ctx.reconnectMs, 1000 * Number(r.headers['retry-after'] ?? 0)));
            return send();
          }
        },
        (err: unknown) => {
          c.error = (err as Error).message;
          c.answeredAt = Date.now();
        },
      );
    cancelDone = send();
  };
  const onFrame = (f: Frame): void => {
    if (terminalSeen) trace.framesAfterTerminal += 1;
    if (TERMINAL.has(f.event)) terminalSeen = true;
    if (f.event === 'token') tokens += 1;
    if ((f.event === 'started' && plan.actAfterTokens === 0) || (f.event === 'token' && tokens >= plan.actAfterTokens))
      act();
  };
  let url = sseUrl;
  for (;;) {
    const lastId = trace.frames.at(-1)?.id;
    trace.streamStatus = undefined;
    trace.streamCode = undefined;
    trace.streamError = undefined;
    trace.closedWithoutTerminal = false;
    try {
      const res = await request(url, {
        method: 'GET',
        dispatcher: ctx.dispatcher,
        headers: {
          ...ctx.auth,
          accept: 'text/event-stream',
          ...(lastId !== undefined ? { 'last-event-id': lastId } : {}),
        },
        signal: controller.signal,
      });
      trace.streamStatus = res.statusCode;
      if (res.statusCode !== 200) {
        trace.streamCode = await errorCode(await res.body.text());
      } else {
        const outcome = await readFrames(res.body, trace.frames, controller.signal, onFrame);
        trace.streamError = outcome.error;
        if (!terminalSeen && outcome.ended === 'closed') trace.closedWithoutTerminal = true;
      }
    } catch (err) {
      if (!controller.signal.aborted) trace.streamError = (err as Error).message;
    }
    const cause = brokenBy(trace.streamStatus, trace.streamError, trace.closedWithoutTerminal);
    if (ctx.reconnectMs === undefined || terminalSeen || controller.signal.aborted || cause === undefined) break;
    trace.reconnects.push(cause);
    await sleep(ctx.reconnectMs);
    url = new URL(`/v2/tasks/${encodeURIComponent(plan.taskId)}/events`, ctx.baseUrl()).href;
  }
  clearTimeout(hangTimer);
  await cancelDone;
  if (trace.hung) trace.disconnectedAt = undefined;
  if (trace.disconnectedAt !== undefined) await resume(trace, ctx);
  trace.endedAt = Date.now();
  return trace;
}

/**
 * After a disconnect: re-attach with Last-Event-ID and read the rest (the terminal frame); with
 * `reconnectMs`, a resume that breaks before the terminal frame is reopened the same way.
 */
async function resume(trace: TaskTrace, ctx: TaskClientContext): Promise<void> {
  const r: NonNullable<TaskTrace['resume']> = { status: undefined, code: undefined, error: undefined, frames: [] };
  trace.resume = r;
  // The orchestrator notices the closed socket asynchronously; give it a moment so the resume
  // does not become the task's new subscriber before the disconnect cancel happened.
  await sleep(250);
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ctx.timeoutMs);
  try {
    for (;;) {
      const lastId = (r.frames.at(-1) ?? trace.frames.at(-1))?.id;
      r.status = undefined;
      r.code = undefined;
      r.error = undefined;
      let closed = false;
      try {
        const res = await request(new URL(`/v2/tasks/${trace.plan.taskId}/events`, ctx.baseUrl()), {
          method: 'GET',
          dispatcher: ctx.dispatcher,
          headers: {
            ...ctx.auth,
            accept: 'text/event-stream',
            ...(lastId !== undefined ? { 'last-event-id': lastId } : {}),
          },
          signal: controller.signal,
        });
        r.status = res.statusCode;
        if (res.statusCode !== 200) r.code = await errorCode(await res.body.text());
        else {
          const out = await readFrames(res.body, r.frames, controller.signal, () => undefined);
          if (out.error !== undefined) r.error = out.error;
          if (out.ended === 'aborted') r.error = 'resume timed out';
          closed = out.ended === 'closed' && !r.frames.some((f) => TERMINAL.has(f.event));
        }
      } catch (err) {
        r.error = controller.signal.aborted ? 'resume timed out' : (err as Error).message;
      }
      const cause =
        r.error === 'resume timed out' || r.frames.some((f) => TERMINAL.has(f.event))
          ? undefined
          : brokenBy(r.status, r.error, closed);
      if (ctx.reconnectMs === undefined || cause === undefined) return;
      trace.reconnects.push(`resume_${cause}`);
      await sleep(ctx.reconnectMs);
    }
  } finally {
    clearTimeout(timer);
  }
}
