import type { Lease } from './pool-table.js';

/**
 * Why a dispatch was aborted from our side (the reason object of its AbortSignal). `cancelled`: the
 * orchestrator's explicit cancel of a re-attachable dispatch (`DELETE …/dispatches/{task_id}`),
 * answered with an `end` whose `stop_type` is `cancel` on the attached connection, if any.
 */
export class DispatchAbort extends Error {
  override readonly name = 'DispatchAbort';
  constructor(
    readonly why: 'client_gone' | 'deadline' | 'pool_stopping' | 'cancelled',
    message: string,
  ) {
    super(message);
  }
}

/** The one abort signal of a dispatch, and the end of its listeners and timer. */
export interface DispatchSignal {
  readonly signal: AbortSignal;
  /** Removes the listeners and the deadline timer; aborts the signal if it is still live (`why` says why the dispatch ended). */
  dispose(why: string): void;
}

/**
 * The abort signal of one dispatch, streamed or not: the client leaving (or, for a re-attachable
 * dispatch, its held state giving up or being cancelled), the pool stopping its
 * in-flight work (the lease's signal) and the deadline passing each abort it with a
 * {@link DispatchAbort} that says which, so the dispatch can answer each one differently.
 */
export function dispatchSignal(
  poolId: string,
  lease: Lease,
  clientGone: AbortSignal,
  deadlineMs: number | undefined,
): DispatchSignal {
  const ac = new AbortController();
  // A re-attachable dispatch's own switch says why with a DispatchAbort (cancelled, window passed).
  const onClientGone = (): void =>
    ac.abort(
      clientGone.reason instanceof DispatchAbort
        ? clientGone.reason
        : new DispatchAbort('client_gone', 'client disconnected'),
    );
  const onLeaseAbort = (): void =>
    ac.abort(
      new DispatchAbort(
        'pool_stopping',
        `pool ${poolId} stopped in-flight work: ${String((lease.signal.reason as Error | undefined)?.message ?? 'stopping')}`,
      ),
    );
  if (clientGone.aborted) onClientGone();
  clientGone.addEventListener('abort', onClientGone, { once: true });
  lease.signal.addEventListener('abort', onLeaseAbort, { once: true });
  if (lease.signal.aborted) onLeaseAbort();
  let deadline: NodeJS.Timeout | undefined;
  if (deadlineMs !== undefined) {
    deadline = setTimeout(
      () => ac.abort(new DispatchAbort('deadline', `deadline of ${deadlineMs} ms passed`)),
      deadlineMs,
    );
    deadline.unref();
  }
  return {
    signal: ac.signal,
    dispose: (why) => {
      if (deadline !== undefined) clearTimeout(deadline);
      clientGone.removeEventListener('abort', onClientGone);
      lease.signal.removeEventListener('abort', onLeaseAbort);
      if (!ac.signal.aborted) ac.abort(new DispatchAbort('client_gone', why));
    },
  };
}
