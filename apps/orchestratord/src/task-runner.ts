import type { DispatchEvent, DispatchRequest, ErrorCode } from '@llama-orch/contracts';
import { readDispatchEvents, type DispatchTarget, type PoolClient } from './pool-client.js';

export type EndDispatchEvent = Extract<DispatchEvent, { type: 'end' }>;

/**
 * Result of one dispatch attempt:
 * - `end`: the node finished the task;
 * - `error`: a terminal failure (after the first token, or one a retry cannot fix);
 * - `retry`: the attempt failed before any token was relayed and the task may be re-placed
 *   (`saturated`: the node had no free slot — not a failure of the pool; `unreachable`: no HTTP
 *   response at all — the whole node is suspect);
 * - `aborted`: our signal fired (cancel, deadline, shutdown); whoever aborted writes the terminal.
 */
export type AttemptOutcome =
  | { readonly kind: 'end'; readonly event: EndDispatchEvent }
  | { readonly kind: 'error'; readonly code: ErrorCode; readonly message: string; readonly retriable: boolean }
  | { readonly kind: 'retry'; readonly code: ErrorCode; readonly message: string; readonly saturated: boolean; readonly unreachable: boolean }
  | { readonly kind: 'aborted' };

export interface RunAttemptOptions {
  client: PoolClient;
  /** The node's dispatch endpoint (h2c or HTTP/1.1). */
  target: DispatchTarget;
  poolId: string;
  body: DispatchRequest;
  signal: AbortSignal;
  /** Whether a token of this task was already relayed (then failures are terminal). */
  hasTokens: () => boolean;
  /** The node accepted the dispatch (200, stream open). */
  onStreamOpen: () => void;
  /** Relays one token; returns false when the task no longer accepts tokens (stop reading). */
  onToken: (text: string) => boolean;
}

function failure(opts: RunAttemptOptions, code: ErrorCode, message: string, unreachable = false): AttemptOutcome {
  if (opts.signal.aborted) return { kind: 'aborted' };
  return opts.hasTokens()
    ? { kind: 'error', code, message, retriable: true }
    : { kind: 'retry', code, message, saturated: false, unreachable };
}

export async function runAttempt(opts: RunAttemptOptions): Promise<AttemptOutcome> {
  let start;
  try {
    start = await opts.client.dispatch(opts.target, opts.poolId, opts.body, opts.signal);
  } catch (err) {
    return failure(opts, 'WORKER_RESET', (err as Error).message, true);
  }
  if (start.kind === 'rejected') {
    const code = start.envelope?.code;
    const message = start.envelope?.message ?? `node answered ${start.status}`;
    if (start.status === 503 && (code === undefined || code === 'POOL_UNREADY' || code === 'REPLICA_EXHAUSTED')) {
      return { kind: 'retry', code: 'POOL_UNREADY', message, saturated: true, unreachable: false };
    }
    if (start.status === 400 || start.status === 413) {
      return { kind: 'error', code: code ?? 'INVALID_PARAMS', message, retriable: false };
    }
    return failure(opts, start.status === 503 ? (code ?? 'POOL_UNAVAILABLE') : 'POOL_UNAVAILABLE', message);
  }
  opts.onStreamOpen();
  // After the terminal event the rest of the body is read to its end (normally nothing), so the
  // connection closes cleanly instead of looking like a cancel to the node.
  let terminal: AttemptOutcome | undefined;
  let stopped = false;
  try {
    await readDispatchEvents(start.body, (ev) => {
      if (opts.signal.aborted) return false;
      if (terminal !== undefined) return true;
      if (ev.type === 'token') {
        if (!opts.onToken(ev.t)) {
          stopped = true;
          return false;
        }
      } else if (ev.type === 'end') {
        terminal = { kind: 'end', event: ev };
      } else if (!ev.retriable || opts.hasTokens()) {
        terminal = { kind: 'error', code: ev.code, message: ev.message, retriable: ev.retriable };
      } else {
        terminal = { kind: 'retry', code: ev.code, message: ev.message, saturated: false, unreachable: false };
      }
      return true;
    });
  } catch (err) {
    if (terminal !== undefined && !opts.signal.aborted) return terminal;
    return failure(opts, 'WORKER_RESET', `stream from node broke: ${(err as Error).message}`);
  }
  if (stopped || opts.signal.aborted) return { kind: 'aborted' };
  return terminal ?? failure(opts, 'WORKER_RESET', 'stream from node ended without an end or error event');
}
