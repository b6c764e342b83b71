import type { ErrorCode } from '@llama-orch/contracts';

/**
 * How a dispatch to pool-managerd failed, one class per meaning. The pool client and the event
 * reader throw these; the dispatch attempt's failure policy (`dispatch-attempt.ts`) branches on
 * the class alone — no other code reads a node's HTTP status.
 */
export abstract class DispatchFailure extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The node could not be reached, or did not send response headers in time (frozen or overloaded). */
export class UpstreamConnectError extends DispatchFailure {
  override readonly name = 'UpstreamConnectError';
  readonly code = 'UPSTREAM_CONNECT';
}

/** The event stream broke, ended without its terminal event, or carried something that is not a DispatchEvent. */
export class UpstreamStreamError extends DispatchFailure {
  override readonly name = 'UpstreamStreamError';
  readonly code = 'UPSTREAM_STREAM';
}

/** The node has no free slot for the dispatch (503 POOL_UNREADY or REPLICA_EXHAUSTED): not a failure of the pool. */
export class PoolSaturatedError extends DispatchFailure {
  override readonly name = 'PoolSaturatedError';
}

/** The node refused the request itself as invalid (400, 413): no other pool would take it either. */
export class DispatchInvalidError extends DispatchFailure {
  override readonly name = 'DispatchInvalidError';
  constructor(
    readonly errorCode: ErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** The node refused the dispatch for a reason of its own (any other status): another pool may take it. */
export class PoolRefusedError extends DispatchFailure {
  override readonly name = 'PoolRefusedError';
  constructor(
    readonly errorCode: ErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/**
 * A re-attach found no dispatch of the task on the node (404): unknown there, already delivered,
 * cancelled, or its re-attach window passed. Its generation cannot be resumed there.
 */
export class DispatchGoneError extends DispatchFailure {
  override readonly name = 'DispatchGoneError';
  constructor(
    readonly poolId: string,
    readonly taskId: string,
    message: string,
  ) {
    super(message);
  }
}

/** The node's engine reported an error event on the stream. */
export class EngineError extends DispatchFailure {
  override readonly name = 'EngineError';
  constructor(
    readonly errorCode: ErrorCode,
    message: string,
    readonly retriable: boolean,
  ) {
    super(message);
  }
}

/**
 * The node stopped heartbeating or left while the dispatch ran: the abort reason of its attempts.
 * A frozen node keeps its sockets open, so waiting for the stream to break could last until the
 * task's deadline.
 */
export class NodeLostError extends DispatchFailure {
  override readonly name = 'NodeLostError';
}
