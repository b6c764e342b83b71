import type { Readable } from 'node:stream';
import type { DispatchEvent, DispatchRequest, ErrorCode } from '@llama-orch/contracts';
import type { AttemptAbort } from './attempt-abort.js';
import { readDispatchEvents } from './dispatch-events.js';
import type { DispatchTarget, PoolClient, TraceHeaders } from './pool-client.js';
import {
  DispatchFailure,
  DispatchGoneError,
  DispatchInvalidError,
  EngineError,
  NodeLostError,
  PoolRefusedError,
  PoolSaturatedError,
  UpstreamConnectError,
  UpstreamStreamError,
} from './upstream-errors.js';

export type EndDispatchEvent = Extract<DispatchEvent, { type: 'end' }>;
export type TokenDispatchEvent = Extract<DispatchEvent, { type: 'token' }>;

/**
 * What a failed attempt says about where it ran, for the registry:
 * - `saturated`: the pool had no free slot — not a failure (the task keeps its retries);
 * - `pool`: the pool failed the task (engine lost, stream broken, refused) — avoid it;
 * - `node`: the node is unreachable or lost — avoid every pool of it.
 */
/**
 * What a failed attempt says about its pool: `saturated` (the node refused: no free slot until its
 * next heartbeat), `leased` (every slot is leased across the cluster: the lease signals keep the
 * view right, no mark), `pool` / `node` (suspect until the next heartbeat).
 */
export type Penalty = 'saturated' | 'leased' | 'pool' | 'node';

/**
 * Result of one dispatch attempt, decided by {@link failurePolicy} alone:
 * - `end`: the node finished the task;
 * - `fail`: terminal — after the first token, a failure a retry cannot fix, or the last retry
 *   spent (then `attempts` counts the failed attempts, `cause` is the last failure's code and
 *   `penalty` still applies to the pool);
 * - `retry`: nothing was relayed; re-place the task (at the head of the queue);
 * - `aborted`: our controller fired (cancel, deadline, shutdown): whoever aborted writes the terminal.
 */
export type AttemptOutcome =
  | { readonly kind: 'end'; readonly event: EndDispatchEvent }
  | {
      readonly kind: 'fail';
      readonly code: ErrorCode;
      readonly message: string;
      readonly retriable: boolean;
      readonly penalty?: Penalty | undefined;
      readonly attempts?: number | undefined;
      readonly cause?: ErrorCode | undefined;
    }
  | { readonly kind: 'retry'; readonly code: ErrorCode; readonly message: string; readonly penalty: Penalty }
  | { readonly kind: 'aborted' };

/** Where an attempt's tokens go (the task's frame log). */
export interface TokenSink {
  /** The node accepted the dispatch: its stream is open. */
  accepted(): void;
  /** Relays one token (its text and a chat delta's other fields); false when the task takes no more (it ended): reading stops. */
  token(ev: TokenDispatchEvent): boolean;
}

export interface AttemptInput {
  /** Starts the dispatch (or, for a task taken over from a dead replica, re-attaches to it). */
  readonly client: Pick<PoolClient, 'dispatch'>;
  /** The node's dispatch endpoint (h2c or HTTP/1.1). */
  readonly target: DispatchTarget;
  readonly poolId: string;
  readonly body: DispatchRequest;
  /**
   * The attempt's own controller: aborted by whoever ends the task, with a {@link NodeLostError}
   * when its node is lost, or by the pool client with an {@link UpstreamConnectError} when the node
   * does not accept the dispatch in time.
   */
  readonly controller: AttemptAbort;
  /** Sent as `X-Correlation-Id`. */
  readonly correlationId: string | undefined;
  /** The attempt span's `traceparent`, with tracing on. */
  readonly trace?: TraceHeaders | undefined;
  readonly sink: TokenSink;
  /** Attempts of this task that failed before this one. */
  readonly failedAttempts: number;
  /** Failed attempts a task may be re-placed after. */
  readonly maxRetries: number;
}

const ABORTED: AttemptOutcome = { kind: 'aborted' };

/**
 * The whole failure policy of one dispatch, by failure class:
 * - no free slot → retry, not counted;
 * - the node refused the request as invalid → fail with its code, not retriable;
 * - a re-attach found no dispatch to re-attach to → fail (retriable), never re-placed;
 * - an engine error event that is not retriable → fail with it;
 * - anything else (unreachable, refused, stream broken or cut short, retriable engine error, node
 *   lost) → fail (retriable) once a token was relayed — the client saw part of the output; before
 *   that → retry elsewhere, at most `maxRetries` times, then fail WORKER_RESET (retriable).
 * Errors that are not a {@link DispatchFailure} are bugs and are thrown.
 */
export function failurePolicy(
  err: unknown,
  relayed: number,
  input: Pick<AttemptInput, 'failedAttempts' | 'maxRetries'>,
): AttemptOutcome {
  if (err instanceof PoolSaturatedError)
    return { kind: 'retry', code: 'POOL_UNREADY', message: err.message, penalty: 'saturated' };
  if (err instanceof DispatchInvalidError)
    return { kind: 'fail', code: err.errorCode, message: err.message, retriable: false };
  // a re-attach found the generation gone: running it again would repeat what the client may have
  if (err instanceof DispatchGoneError)
    return { kind: 'fail', code: 'WORKER_RESET', message: err.message, retriable: true, penalty: 'pool' };
  let code: ErrorCode;
  let penalty: Penalty;
  if (err instanceof EngineError) {
    if (!err.retriable || relayed > 0)
      return { kind: 'fail', code: err.errorCode, message: err.message, retriable: err.retriable };
    code = err.errorCode;
    penalty = 'pool';
  } else if (err instanceof PoolRefusedError) {
    code = err.errorCode;
    penalty = 'pool';
  } else if (err instanceof UpstreamConnectError || err instanceof NodeLostError) {
    code = 'WORKER_RESET';
    penalty = 'node';
  } else if (err instanceof UpstreamStreamError) {
    code = 'WORKER_RESET';
    penalty = 'pool';
  } else {
    throw err;
  }
  if (relayed > 0) return { kind: 'fail', code, message: err.message, retriable: true };
  const attempts = input.failedAttempts + 1;
  if (attempts > input.maxRetries) {
    const message = `node failed before the first token (${attempts} attempts): ${err.message}`;
    return { kind: 'fail', code: 'WORKER_RESET', message, retriable: true, penalty, attempts, cause: code };
  }
  return { kind: 'retry', code, message: err.message, penalty };
}

/** Runs one dispatch of a task to one pool and relays its tokens; never calls back beyond `sink`. */
export async function runAttempt(input: AttemptInput): Promise<AttemptOutcome> {
  const { sink } = input;
  const { controller } = input;
  let relayed = 0;
  /** Our own abort ends the attempt quietly, unless its reason is a failure (node lost, dispatch not accepted). */
  const outcome = (err: unknown): AttemptOutcome => {
    if (controller.aborted) {
      if (!(controller.reason instanceof DispatchFailure)) return ABORTED;
      return failurePolicy(controller.reason, relayed, input);
    }
    return failurePolicy(err, relayed, input);
  };
  let body: Readable;
  try {
    body = await input.client.dispatch(
      input.target,
      input.poolId,
      input.body,
      input.controller,
      input.correlationId,
      input.trace,
    );
  } catch (err) {
    return outcome(
      err instanceof DispatchFailure ? err : new UpstreamConnectError((err as Error).message, { cause: err }),
    );
  }
  sink.accepted();
  // After the terminal event the rest of the body is read to its end (normally nothing), so the
  // connection closes cleanly instead of looking like a cancel to the node.
  let terminal: AttemptOutcome | undefined;
  let failure: DispatchFailure | undefined;
  let stopped = false;
  try {
    await readDispatchEvents(body, (ev) => {
      if (controller.aborted) return false;
      if (terminal !== undefined || failure !== undefined) return true;
      if (ev.type === 'token') {
        if (!sink.token(ev)) {
          stopped = true;
          return false;
        }
        relayed += 1;
      } else if (ev.type === 'end') {
        terminal = { kind: 'end', event: ev };
      } else {
        failure = new EngineError(ev.code, ev.message, ev.retriable);
      }
      return true;
    });
  } catch (err) {
    if (!controller.aborted && terminal !== undefined) return terminal;
    if (!controller.aborted && failure !== undefined) return outcome(failure);
    return outcome(new UpstreamStreamError(`stream from node broke: ${(err as Error).message}`, { cause: err }));
  }
  if (stopped) return ABORTED;
  if (controller.aborted) return outcome(undefined);
  if (terminal !== undefined) return terminal;
  return outcome(failure ?? new UpstreamStreamError('stream from node ended without an end or error event'));
}
