import type { DispatchEvent, DispatchRequest } from '@llama-orch/contracts';
import {
  AdapterError,
  CompletionAbortedError,
  type AnswerFigures,
  type AnswerInput,
  type EngineAnswer,
} from '@llama-orch/llamacpp-adapter';
import type { DispatchOptions } from './dispatch.js';
import { DispatchAbort, dispatchSignal } from './dispatch-signal.js';
import type { DispatchOutcome } from './dispatch-trace.js';

/** Receives the one NDJSON line of a non-streamed dispatch (a `result` or an `error` event). */
export type AnswerSend = (line: string) => void;

type ErrorEvent = Extract<DispatchEvent, { type: 'error' }>;

/** The pool's facts a result event carries beside the engine's figures. */
export interface ResultMeta {
  engine_version: string;
  pool_id: string;
  node_id: string;
}

/**
 * The `result` event line of an answer: its figures and the pool's facts as JSON, then the
 * engine's body text spliced in as it came (`"body":<engine bytes>}`), so the largest part of the
 * line is never serialised again. llama-server writes its bodies as one line of compact JSON; a
 * body with a line break (pretty-printed by some other server) is serialised from its parsed form
 * instead, which keeps the line one NDJSON line. The result is what `DispatchResultEventSchema`
 * accepts. Performance notes: engine answer spliced.
 */
export function resultLine(answer: EngineAnswer, meta: ResultMeta): string {
  const f: AnswerFigures = answer.figures;
  const head = {
    type: 'result',
    tokens_out: f.tokens_out,
    decode_ms: f.decode_ms,
    stop_type: f.stop_type,
    finish_reason: f.finish_reason,
    prompt_tokens: f.prompt_tokens,
    ...(f.cached_tokens !== undefined ? { cached_tokens: f.cached_tokens } : {}),
    engine_version: meta.engine_version,
    pool_id: meta.pool_id,
    node_id: meta.node_id,
  };
  const json = JSON.stringify(head);
  const body = answer.text.includes('\n') ? JSON.stringify(answer.body) : answer.text;
  return `${json.slice(0, -1)},"body":${body}}\n`;
}

const errorLine = (ev: ErrorEvent): string => `${JSON.stringify(ev)}\n`;

/** A chat or completion as the adapter's answer input (the schema guarantees the input its workload needs). */
function answerInput(req: DispatchRequest): AnswerInput {
  return req.workload === 'chat'
    ? { ...req, workload: 'chat', messages: req.messages ?? [] }
    : { ...req, workload: 'completion', prompt: req.prompt ?? '' };
}

/**
 * Runs one non-streamed dispatch (`stream: false`): asks the engine for one answer on its OpenAI
 * route — or, for an engine call, on the call's route with the door's body (`/v1/embeddings`,
 * `/v1/rerank`, `/infill`) — and hands `send` exactly one line — the `result` event, or an `error` event as
 * {@link runDispatch} would send it (deadline DECODE_TIMEOUT, pool stopping POOL_UNAVAILABLE, the
 * adapter's error codes) — unless the client went away (then nothing: nobody is listening).
 * The same lease, abort and logging rules as a streamed dispatch: the lease is released however it
 * ends, and aborting closes the engine socket (the engine frees the slot within its 1 s poll,
 * reference §5). Logged at info: `dispatch started` (`stream: false`), `engine request sent`,
 * one `dispatch ended`.
 */
export async function runAnswerDispatch(
  {
    poolId,
    nodeId,
    request: req,
    lease,
    client,
    engineUrl,
    engineVersion,
    pools,
    metrics,
    logger: log,
    clientGone,
    trace,
  }: DispatchOptions,
  send: AnswerSend,
): Promise<void> {
  const taskId = req.task_id;
  const ac = dispatchSignal(poolId, lease, clientGone, req.deadline_ms);
  const started = performance.now();
  let outcome: DispatchOutcome = 'error';
  const sendError = (ev: ErrorEvent): void => {
    trace?.failed(ev);
    send(errorLine(ev));
  };
  let figures: AnswerFigures | undefined;
  log.info(
    {
      pool_id: poolId,
      task_id: taskId,
      workload: req.call?.kind ?? req.workload,
      max_tokens: req.max_tokens,
      cache_prompt: req.cache_prompt,
      stream: false,
      human: `answer start on pool ${poolId}`,
    },
    'dispatch started',
  );
  try {
    const headers = trace?.engineRequest(engineUrl);
    const running =
      req.call !== undefined
        ? client.call(req.call, ac.signal, headers)
        : client.answer(answerInput(req), ac.signal, headers);
    log.info({ pool_id: poolId, task_id: taskId, engine_url: engineUrl }, 'engine request sent');
    const answer = await running;
    figures = answer.figures;
    pools.recordDecode(poolId, figures.tokens_out, figures.decode_ms);
    metrics.tokensOut.inc({ pool_id: poolId }, figures.tokens_out);
    metrics.promptTokens.inc({ pool_id: poolId }, figures.prompt_tokens);
    if (figures.cached_tokens !== undefined) metrics.cachedPromptTokens.inc({ pool_id: poolId }, figures.cached_tokens);
    outcome = 'end';
    trace?.answered(figures);
    send(resultLine(answer, { engine_version: engineVersion, pool_id: poolId, node_id: nodeId }));
  } catch (err) {
    const reason: unknown = ac.signal.reason;
    if (err instanceof CompletionAbortedError && reason instanceof DispatchAbort) {
      if (reason.why === 'client_gone') {
        outcome = 'canceled';
        log.info(
          { pool_id: poolId, task_id: taskId, human: 'client disconnected: engine request aborted' },
          'dispatch canceled',
        );
        return;
      }
      if (reason.why === 'deadline') log.warn({ pool_id: poolId, task_id: taskId }, 'dispatch deadline passed');
      sendError({
        type: 'error',
        code: reason.why === 'deadline' ? 'DECODE_TIMEOUT' : 'POOL_UNAVAILABLE',
        message: reason.message,
        retriable: true,
      });
      return;
    }
    if (err instanceof AdapterError) {
      log.warn({ err, pool_id: poolId, task_id: taskId }, 'dispatch failed');
      sendError({ type: 'error', code: err.errorCode, message: err.message, retriable: err.retriable });
      return;
    }
    log.error({ err, pool_id: poolId, task_id: taskId }, 'dispatch failed unexpectedly');
    sendError({ type: 'error', code: 'INTERNAL', message: 'internal error while answering', retriable: false });
  } finally {
    ac.dispose('dispatch over');
    lease.release();
    metrics.dispatches.inc({ pool_id: poolId, outcome });
    trace?.end(outcome);
    const ms = Math.round(performance.now() - started);
    const f = figures;
    if (f !== undefined) {
      log.info(
        {
          pool_id: poolId,
          task_id: taskId,
          outcome,
          ms,
          stream: false,
          tokens_out: f.tokens_out,
          decode_ms: f.decode_ms,
          stop_type: f.stop_type,
          finish_reason: f.finish_reason,
          prompt_tokens: f.prompt_tokens,
          cached_tokens: f.cached_tokens,
          human: `answer end: ${f.tokens_out} tokens`,
        },
        'dispatch ended',
      );
    } else {
      log.info({ pool_id: poolId, task_id: taskId, outcome, ms, stream: false }, 'dispatch ended');
    }
  }
}
