import type { DispatchEvent, DispatchRequest } from '@llama-orch/contracts';
import type { Log } from '@llama-orch/daemon-support';
import {
  AdapterError,
  CompletionAbortedError,
  type CompletionEvent,
  type LlamaServerClient,
  type RequestHeaders,
} from '@llama-orch/llamacpp-adapter';
import type { PoolManagerMetrics } from '../support/metrics.js';
import { DispatchAbort, dispatchSignal } from './dispatch-signal.js';
import type { DispatchOutcome, DispatchTrace } from './dispatch-trace.js';
import type { Lease, PoolTable } from './pool-table.js';

/**
 * The logging calls a dispatch makes: a pino logger or Fastify's request logger. The caller binds
 * `correlation_id` (the request id), so every line of the dispatch carries it.
 */
export type DispatchLogger = Omit<Log, 'child'>;

export { DispatchAbort } from './dispatch-signal.js';

export interface DispatchOptions {
  poolId: string;
  nodeId: string;
  request: DispatchRequest;
  lease: Lease;
  client: LlamaServerClient;
  engineUrl: string;
  engineVersion: string;
  pools: PoolTable;
  metrics: PoolManagerMetrics;
  logger: DispatchLogger;
  /**
   * Aborted when the HTTP client goes away; for a re-attachable dispatch, by its held state (with a
   * {@link DispatchAbort} reason: `cancelled` on DELETE, `client_gone` when its window passed).
   */
  clientGone: AbortSignal;
  /** Its spans, when tracing is on (made by the route); the dispatch ends them. */
  trace?: DispatchTrace | undefined;
}

/**
 * Runs the engine stream of a dispatch into `onEvent`: a `chat` goes to the engine's
 * `/v1/chat/completions` (the model's template renders the messages), a `completion` to its native
 * `/completion`. Both give the same events. The request schema requires `messages` for a chat and
 * `prompt` for a completion; a request built without it in-process fails the dispatch with
 * INVALID_PARAMS rather than sending the engine an empty prompt. A streamed infill call goes to
 * `/infill` with the door's body.
 */
function engineStream(
  client: LlamaServerClient,
  req: DispatchRequest,
  signal: AbortSignal,
  onEvent: (ev: CompletionEvent) => Promise<void> | void,
  headers: RequestHeaders | undefined,
): Promise<void> {
  // An engine call streams only as infill (`/infill` streams as `/completion` does); the others answer once.
  if (req.call !== undefined) {
    if (req.call.kind !== 'infill')
      throw new DispatchInputError(`${req.call.kind} is answered once: dispatch it with stream: false`);
    return client.infillInto(req.call.body, onEvent, signal, headers);
  }
  if (req.workload === 'chat') {
    if (req.messages === undefined) throw new DispatchInputError('messages is required for a chat');
    return client.chatInto({ ...req, messages: req.messages }, onEvent, signal, headers);
  }
  if (req.prompt === undefined) throw new DispatchInputError('prompt is required for a completion');
  return client.completeInto({ ...req, prompt: req.prompt }, onEvent, signal, headers);
}

/** A dispatch request without the input its workload needs (only possible in-process). */
class DispatchInputError extends Error {
  override readonly name = 'DispatchInputError';
}

/**
 * Where a dispatch's events go, in order, synchronously as the engine's frames arrive. A returned
 * promise (the consumer is backed up) pauses the engine stream until it settles; a rejected one
 * ends the dispatch like the client leaving.
 */
export type DispatchEmit = (ev: DispatchEvent) => Promise<void> | void;

/**
 * Runs one dispatch, handing its normalised events to `emit`: `token`* then exactly one `end` or
 * `error`, unless the client went away (then nothing more is sent: nobody is listening). Resolves
 * when the dispatch is over, whatever the outcome (failures are events). The lease is released
 * however it ends; aborting closes the engine socket, which frees the engine's slot. Logged at
 * info: the start, the engine request, and one `dispatch ended` line whatever the outcome.
 * Push, not an async generator: performance notes, push dispatch.
 */
export async function runDispatch(
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
  emitEvent: DispatchEmit,
): Promise<void> {
  // Traced: the events pass the spans on their way (first token, end or error).
  const emit = trace === undefined ? emitEvent : trace.watch(emitEvent);
  // pool_id and task_id are written on each line, not bound in a child logger per dispatch, and
  // each line's fields are one object literal (performance notes: dispatch log lines).
  const taskId = req.task_id;
  const ac = dispatchSignal(poolId, lease, clientGone, req.deadline_ms);
  const started = performance.now();
  let tokens = 0;
  let outcome: DispatchOutcome = 'error';
  let end: Extract<DispatchEvent, { type: 'end' }> | undefined;
  log.info(
    {
      pool_id: poolId,
      task_id: taskId,
      workload: req.workload,
      max_tokens: req.max_tokens,
      cache_prompt: req.cache_prompt,
      human: `stream start on pool ${poolId}`,
    },
    'dispatch started',
  );
  const onEvent = (ev: CompletionEvent): Promise<void> | void => {
    if (ev.type === 'token') {
      tokens += 1;
      return emit(ev);
    }
    pools.recordDecode(poolId, ev.tokens_out, ev.decode_ms);
    metrics.tokensOut.inc({ pool_id: poolId }, ev.tokens_out);
    if (ev.prompt_tokens !== undefined) metrics.promptTokens.inc({ pool_id: poolId }, ev.prompt_tokens);
    if (ev.cached_tokens !== undefined) metrics.cachedPromptTokens.inc({ pool_id: poolId }, ev.cached_tokens);
    outcome = 'end';
    end = { ...ev, engine_version: engineVersion, pool_id: poolId, node_id: nodeId };
    return emit(end);
  };
  try {
    const running = engineStream(client, req, ac.signal, onEvent, trace?.engineRequest(engineUrl));
    log.info({ pool_id: poolId, task_id: taskId, engine_url: engineUrl }, 'engine request sent');
    await running;
  } catch (err) {
    const reason: unknown = ac.signal.reason;
    if (err instanceof CompletionAbortedError && reason instanceof DispatchAbort) {
      if (reason.why === 'cancelled') {
        outcome = 'canceled';
        log.info(
          { pool_id: poolId, task_id: taskId, tokens, human: 'cancelled by the orchestrator: engine request aborted' },
          'dispatch canceled',
        );
        await emit({
          type: 'end',
          tokens_out: tokens,
          decode_ms: 0,
          stop_type: 'cancel',
          engine_version: engineVersion,
          pool_id: poolId,
          node_id: nodeId,
        });
        return;
      }
      if (reason.why === 'client_gone') {
        outcome = 'canceled';
        log.info(
          { pool_id: poolId, task_id: taskId, tokens, human: 'client disconnected: engine request aborted' },
          'dispatch canceled',
        );
        return;
      }
      if (reason.why === 'deadline') {
        log.warn({ pool_id: poolId, task_id: taskId, tokens }, 'dispatch deadline passed');
        await emit({ type: 'error', code: 'DECODE_TIMEOUT', message: reason.message, retriable: true });
        return;
      }
      await emit({ type: 'error', code: 'POOL_UNAVAILABLE', message: reason.message, retriable: true });
      return;
    }
    if (err instanceof DispatchInputError) {
      log.warn({ pool_id: poolId, task_id: taskId, reason: err.message }, 'dispatch refused');
      await emit({ type: 'error', code: 'INVALID_PARAMS', message: err.message, retriable: false });
      return;
    }
    if (err instanceof AdapterError) {
      log.warn({ err, pool_id: poolId, task_id: taskId, tokens }, 'dispatch failed');
      await emit({ type: 'error', code: err.errorCode, message: err.message, retriable: err.retriable });
      return;
    }
    log.error({ err, pool_id: poolId, task_id: taskId }, 'dispatch failed unexpectedly');
    await emit({ type: 'error', code: 'INTERNAL', message: 'internal error while streaming', retriable: false });
  } finally {
    // Ends the engine request if the consumer failed mid-stream.
    ac.dispose('stream closed');
    lease.release();
    metrics.dispatches.inc({ pool_id: poolId, outcome });
    trace?.end(outcome);
    const ms = Math.round(performance.now() - started);
    if (end !== undefined) {
      log.info(
        {
          pool_id: poolId,
          task_id: taskId,
          outcome,
          ms,
          tokens_out: end.tokens_out,
          decode_ms: end.decode_ms,
          stop_type: end.stop_type,
          finish_reason: end.finish_reason,
          prompt_tokens: end.prompt_tokens,
          cached_tokens: end.cached_tokens,
          human: `stream end: ${end.tokens_out} tokens`,
        },
        'dispatch ended',
      );
    } else {
      log.info({ pool_id: poolId, task_id: taskId, outcome, ms, tokens }, 'dispatch ended');
    }
  }
}
