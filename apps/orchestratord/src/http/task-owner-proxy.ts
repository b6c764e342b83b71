import { pipeline } from 'node:stream/promises';
import { CORRELATION_ID_HEADER } from '@llama-orch/contracts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { injectTraceparent } from '@llama-orch/daemon-support/tracing';
import { request, type Dispatcher } from 'undici';
import { InternalError } from '../errors.js';
import { answerEndedStream } from './ended-task-answer.js';
import { mayAccess } from './task-access.js';
import type { ClusterTasks, TaskOwner } from '../tasks/shared/cluster-tasks.js';

/** Set on a request one replica passes to another: it is never passed on again. */
export const FORWARDED_BY_HEADER = 'x-llorch-forwarded-by';
/** What the owner needs of the client's request: who it is, where its stream resumes, its correlation id. */
const PASSED = ['authorization', 'x-api-key', 'last-event-id', 'accept', CORRELATION_ID_HEADER] as const;
/** Connection-level headers of the owner's answer; the client's connection has its own. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length']);

/**
 * What {@link TaskOwnerProxy.forward} did: `answered` (the owner's answer went to the client),
 * `taken` (the owner was found dead and this replica took the task over: answer it here), `absent`
 * (no other replica owns it: the caller answers 404).
 */
export type Forwarded = 'answered' | 'taken' | 'absent';

/** The address `replicaId` announces while it is a listed replica (announced within its TTL and not left: replica membership); undefined when it is not listed. */
export type ReplicaListed = (replicaId: string) => Promise<string | undefined>;

/**
 * With a Redis store a task lives on the replica that admitted it (its frames, its dispatch). A
 * request for a task another replica owns (`GET /v2/tasks/{id}/events`, `POST …/cancel`) is
 * passed to the owner's advertised address and its answer streamed back: the token path stays on
 * the owner (no store round trip per frame), and a client that leaves aborts the owner's request,
 * which is a disconnect there like any other.
 *
 * An owner whose address refuses the connection (ECONNREFUSED: nothing listens there) while it is
 * still a listed replica announcing that very address died without leaving (a replica that stops cleanly leaves before its
 * listener closes): this replica takes the task over at once (`ClusterTasks.seize`) instead of
 * waiting for its lease to lapse, which is how a client resuming after a replica's SIGKILL gets
 * its tokens again within a fraction of a heartbeat interval.
 */
export class TaskOwnerProxy {
  readonly #cluster: ClusterTasks;
  readonly #dispatcher: Dispatcher;
  readonly #listed: ReplicaListed;

  constructor(cluster: ClusterTasks, dispatcher: Dispatcher, listed: ReplicaListed) {
    this.#cluster = cluster;
    this.#dispatcher = dispatcher;
    this.#listed = listed;
  }

  /**
   * Answers `req` from the replica that owns task `id`, or takes the task over when that replica is
   * dead. `fromRecord` (default true): an ended task whose owner cannot answer is answered from its
   * shared record as its event stream or cancel would be; false leaves it to the caller (`absent`).
   */
  async forward(
    req: FastifyRequest,
    reply: FastifyReply,
    id: string,
    { fromRecord = true }: { fromRecord?: boolean } = {},
  ): Promise<Forwarded> {
    const forwarded = req.headers[FORWARDED_BY_HEADER] !== undefined;
    const owner = await this.#cluster.ownerOf(id);
    // Another key's task is absent to this caller: not passed on, not taken over, not read from the record.
    if (owner === undefined || !mayAccess(req.principal, owner.clientKey)) return 'absent';
    if (owner.replica === this.#cluster.replicaId) {
      // Named as owner but not held here: an earlier run of this replica id (restarted by `llorch
      // up` after a crash) admitted it, its lease lapses within 2 heartbeat intervals and it is taken
      // over; or this replica is taking it over right now (seizeQueued, a moment before the task is
      // here). Either way a 404 would end the client's EventSource for good, so ask for a retry.
      if (owner.ended) return fromRecord && answerFromRecord(req, reply, owner) ? 'answered' : 'absent';
      throw new InternalError(
        `task ${id} is replica ${owner.replica}'s but not held by this process (admitted by an earlier run of it, or being taken over); retry`,
        {
          retriable: true,
          retryAfterMs: 500,
        },
      );
    }
    // Passed here by a replica that read an earlier owner: the task was taken over meanwhile. The
    // client's retry reaches the new owner; a 404 would end its EventSource for good.
    if (forwarded)
      throw new InternalError(`task ${id} moved to replica ${owner.replica} while this request was passed here`, {
        retriable: true,
        retryAfterMs: 100,
      });
    const headers: Record<string, string> = { [FORWARDED_BY_HEADER]: this.#cluster.replicaId };
    for (const name of PASSED) {
      const v = req.headers[name];
      if (typeof v === 'string') headers[name] = v;
    }
    // With tracing on, the owner's server span is a child of this request's: one trace across replicas.
    if (req.traceContext !== undefined) injectTraceparent(headers, req.traceContext);
    const left = new AbortController();
    reply.raw.on('close', () => left.abort());
    let res: Dispatcher.ResponseData;
    try {
      res = await request(`${owner.address}${req.url}`, {
        method: req.method === 'POST' ? 'POST' : 'GET',
        headers,
        dispatcher: this.#dispatcher,
        signal: left.signal,
      });
    } catch (err) {
      // The owner died after the task ended: its frame log went with it, its outcome is in the store.
      if (owner.ended) return fromRecord && answerFromRecord(req, reply, owner) ? 'answered' : 'absent';
      if (
        refused(err) &&
        (await this.#listed(owner.replica)) === owner.address &&
        (await this.#cluster.seize(id, owner))
      )
        return 'taken';
      throw new InternalError(
        `replica ${owner.replica}, which owns task ${id}, is unreachable at ${owner.address}: ${(err as Error).message}`,
        {
          retriable: true,
          retryAfterMs: 1000,
        },
      );
    }
    reply.hijack();
    const out: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
    reply.raw.writeHead(res.statusCode, out);
    await pipeline(res.body, reply.raw).catch(() => {
      // The client or the owner went away; each side sees its own close.
    });
    return 'answered';
  }
}

/**
 * An ended task whose owner cannot answer (it died, or it is a later run of its id, which holds none
 * of the frames): its outcome from the shared record (http/ended-task-answer.ts), a cancel 204 as
 * for any ended task. Without it such a task answered 500, then 404, and its client never learnt
 * how it ended. False when the record keeps no readable outcome (the caller answers 404).
 */
function answerFromRecord(req: FastifyRequest, reply: FastifyReply, owner: TaskOwner): boolean {
  if (owner.outcome === undefined) return false;
  if (req.method !== 'POST') return answerEndedStream(req, reply, owner.outcome);
  void reply.code(204).send();
  return true;
}

/** A connection refused: nothing listens at the address (a timeout or a reset says nothing of the kind). */
function refused(err: unknown): boolean {
  const code = (e: unknown): unknown =>
    typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  return code(err) === 'ECONNREFUSED' || code((err as { cause?: unknown } | undefined)?.cause) === 'ECONNREFUSED';
}
