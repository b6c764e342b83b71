/** Typed errors of the benchmark runner; `code` is stable, messages are for people. */

export class BenchError extends Error {
  override readonly name: string = 'BenchError';
  readonly code: string = 'BENCH_FAILED';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The cluster (or a pool) did not reach the state a benchmark needs. */
export class ClusterNotReadyError extends BenchError {
  override readonly name = 'ClusterNotReadyError';
  override readonly code = 'CLUSTER_NOT_READY';
}

/** A request the benchmark depends on got an unexpected answer. */
export class UnexpectedResponseError extends BenchError {
  override readonly name = 'UnexpectedResponseError';
  override readonly code = 'UNEXPECTED_RESPONSE';
}

/** The command line named an unknown benchmark or a build output is missing. */
export class UsageError extends BenchError {
  override readonly name = 'UsageError';
  override readonly code = 'USAGE';
}
