import type { LogFn } from 'pino';

/** The logging calls a dispatch makes (a pino logger or Fastify's request logger). */
export interface DispatchLogger {
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
}
import type { DispatchEvent, DispatchRequest } from '@llama-orch/contracts';
import { AdapterError, CompletionAbortedError, type LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import type { PoolManagerMetrics } from './metrics.js';
import type { Lease, PoolRegistry } from './registry.js';

/** Why a dispatch was aborted from our side (the reason object of its AbortSignal). */
export class DispatchAbort extends Error {
  override readonly name = 'DispatchAbort';
  constructor(readonly why: 'client_gone' | 'deadline' | 'pool_stopping', message: string) {
    super(message);
  }
}

export interface DispatchOptions {
  poolId: string;
  nodeId: string;
  request: DispatchRequest;
  lease: Lease;
  client: LlamaServerClient;
  engineVersion: string;
  registry: PoolRegistry;
  metrics: PoolManagerMetrics;
  logger: DispatchLogger;
  /** Aborted when the HTTP client goes away. */
  clientGone: AbortSignal;
}

/**
 * Streams one dispatch as normalised events: `token`* then exactly one `end` or `error`, unless the
 * client went away (then nothing more is sent: nobody is listening). The lease is released however
 * it ends; aborting closes the engine socket, which frees the engine's slot.
 */
export async function* dispatchEvents(o: DispatchOptions): AsyncGenerator<DispatchEvent, void, undefined> {
  const { poolId, request: req, lease, logger: log } = o;
  // poolId and taskId go on every line instead of a pino child per dispatch (created before the
  // engine request). Written out, not spread from a shared object: V8 gives `{ ...o, k }` a new
  // hidden class per object, which makes pino's serialiser slow for every line that follows.
  const taskId = req.task_id;
  const ac = new AbortController();
  const onClientGone = (): void => ac.abort(new DispatchAbort('client_gone', 'client disconnected'));
  const onLeaseAbort = (): void => ac.abort(new DispatchAbort('pool_stopping', `pool ${poolId} stopped in-flight work: ${String((lease.signal.reason as Error | undefined)?.message ?? 'stopping')}`));
  if (o.clientGone.aborted) onClientGone();
  o.clientGone.addEventListener('abort', onClientGone, { once: true });
  lease.signal.addEventListener('abort', onLeaseAbort, { once: true });
  if (lease.signal.aborted) onLeaseAbort();
  let deadline: NodeJS.Timeout | undefined;
  if (req.deadline_ms !== undefined) {
    deadline = setTimeout(() => ac.abort(new DispatchAbort('deadline', `deadline of ${req.deadline_ms} ms passed`)), req.deadline_ms);
    deadline.unref();
  }
  const started = performance.now();
  let tokens = 0;
  let outcome = 'error';
  log.info({ poolId, taskId, maxTokens: req.max_tokens, human: `stream start on pool ${poolId}` }, 'dispatch started');
  try {
    for await (const ev of o.client.complete(req, ac.signal)) {
      if (ev.type === 'token') {
        tokens += 1;
        yield ev;
        continue;
      }
      o.registry.recordDecode(poolId, ev.tokens_out, ev.decode_ms);
      o.metrics.tokensOut.inc({ pool_id: poolId }, ev.tokens_out);
      outcome = 'end';
      log.info({ poolId, taskId, tokensOut: ev.tokens_out, decodeMs: ev.decode_ms, stopType: ev.stop_type, human: `stream end: ${ev.tokens_out} tokens` }, 'dispatch ended');
      yield { ...ev, engine_version: o.engineVersion, pool_id: poolId, node_id: o.nodeId };
      return;
    }
  } catch (err) {
    const reason: unknown = ac.signal.reason;
    if (err instanceof CompletionAbortedError && reason instanceof DispatchAbort) {
      if (reason.why === 'client_gone') {
        outcome = 'canceled';
        log.info({ poolId, taskId, tokens, human: 'client disconnected: engine request aborted' }, 'dispatch canceled');
        return;
      }
      if (reason.why === 'deadline') {
        log.warn({ poolId, taskId, tokens }, 'dispatch deadline passed');
        yield { type: 'error', code: 'DECODE_TIMEOUT', message: reason.message, retriable: true };
        return;
      }
      yield { type: 'error', code: 'POOL_UNAVAILABLE', message: reason.message, retriable: true };
      return;
    }
    if (err instanceof AdapterError) {
      log.warn({ err, poolId, taskId, tokens }, 'dispatch failed');
      yield { type: 'error', code: err.errorCode, message: err.message, retriable: err.retriable };
      return;
    }
    log.error({ err, poolId, taskId }, 'dispatch failed unexpectedly');
    yield { type: 'error', code: 'INTERNAL', message: 'internal error while streaming', retriable: false };
  } finally {
    if (deadline !== undefined) clearTimeout(deadline);
    o.clientGone.removeEventListener('abort', onClientGone);
    lease.signal.removeEventListener('abort', onLeaseAbort);
    // Ends the engine request if the consumer stopped early (the generator's return path).
    if (!ac.signal.aborted) ac.abort(new DispatchAbort('client_gone', 'stream closed'));
    lease.release();
    o.metrics.dispatches.inc({ pool_id: poolId, outcome });
    log.debug({ poolId, taskId, ms: Math.round(performance.now() - started), outcome }, 'dispatch finished');
  }
}
