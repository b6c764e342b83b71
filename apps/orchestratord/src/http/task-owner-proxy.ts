import { pipeline } from 'node:stream/promises';
import { CORRELATION_ID_HEADER, formatSseFrame, SseFrameSchema } from '@llama-orch/contracts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { request, type Dispatcher } from 'undici';
import { InternalError } from '../errors.js';
import type { ClusterTasks, TaskOwner } from '../tasks/cluster-tasks.js';

/** Set on a request one replica passes to another: it is never passed on again. */
export const FORWARDED_BY_HEADER = 'x-llorch-forwarded-by';
/** What the owner needs of the client's request: who it is, where its stream resumes, its correlation id. */
const PASSED = ['authorization', 'x-api-key', 'last-event-id', 'accept', CORRELATION_ID_HEADER] as const;
/** Connection-level headers of the owner's answer; the client's connection has its own. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length']);

/**
 * With a Redis store a task lives on the replica that admitted it (its frames, its dispatch). A
 * request for a task another replica owns (`GET /v2/tasks/{id}/events`, `POST …/cancel`) is
 * passed to the owner's advertised address and its answer streamed back: the token path stays on
 * the owner (no store round trip per frame), and a client that leaves aborts the owner's request,
 * which is a disconnect there like any other.
 */
export class TaskOwnerProxy {
  readonly #cluster: ClusterTasks;
  readonly #dispatcher: Dispatcher;

  constructor(cluster: ClusterTasks, dispatcher: Dispatcher) {
    this.#cluster = cluster;
    this.#dispatcher = dispatcher;
  }

  /** Answers `req` from the replica that owns task `id`; false when no other replica does (the caller answers 404). */
  async forward(req: FastifyRequest, reply: FastifyReply, id: string): Promise<boolean> {
    const forwarded = req.headers[FORWARDED_BY_HEADER] !== undefined;
    const owner = await this.#cluster.ownerOf(id);
    if (owner === undefined) return false;
    if (owner.replica === this.#cluster.replicaId) {
      // Named as owner but not held here: an earlier run of this replica id (restarted by `llorch
      // up` after a crash) admitted it. Its lease lapses within 2 heartbeat intervals and it is taken
      // over; until then a 404 would end the client's EventSource for good, so ask for a retry.
      if (owner.ended) return answerFromRecord(req, reply, owner);
      throw new InternalError(`task ${id} belongs to an earlier run of replica ${owner.replica}; it is taken over within the owner lease`, { retriable: true, retryAfterMs: 500 });
    }
    if (forwarded) return false;
    const headers: Record<string, string> = { [FORWARDED_BY_HEADER]: this.#cluster.replicaId };
    for (const name of PASSED) {
      const v = req.headers[name];
      if (typeof v === 'string') headers[name] = v;
    }
    const left = new AbortController();
    reply.raw.on('close', () => left.abort());
    let res: Dispatcher.ResponseData;
    try {
      res = await request(`${owner.address}${req.url}`, { method: req.method === 'POST' ? 'POST' : 'GET', headers, dispatcher: this.#dispatcher, signal: left.signal });
    } catch (err) {
      // The owner died after the task ended: its frame log went with it, its outcome is in the store.
      if (owner.ended) return answerFromRecord(req, reply, owner);
      throw new InternalError(`replica ${owner.replica}, which owns task ${id}, is unreachable at ${owner.address}: ${(err as Error).message}`, {
        retriable: true,
        retryAfterMs: 1000,
      });
    }
    reply.hijack();
    const out: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
    reply.raw.writeHead(res.statusCode, out);
    await pipeline(res.body, reply.raw).catch(() => {
      // The client or the owner went away; each side sees its own close.
    });
    return true;
  }
}

/**
 * An ended task whose owner cannot answer (it died, or restarted with its id and holds none of its
 * earlier run's frames): its outcome from the shared record. A stream gets the terminal frame with
 * its id in the owner's log (frames between the client's `Last-Event-ID` and it were only in the
 * owner's memory: the id jump shows the client what it missed), a cancel 204 as for any ended task.
 * Without it such a task answered 404 and its client never learnt how it ended. False when the
 * record keeps no readable outcome (the caller answers 404).
 */
function answerFromRecord(req: FastifyRequest, reply: FastifyReply, owner: TaskOwner): boolean {
  const { id, ...frame } = owner.outcome ?? {};
  const parsed = SseFrameSchema.safeParse(frame);
  if (!parsed.success) return false;
  if (req.method === 'POST') {
    void reply.code(204).send();
    return true;
  }
  const last = Number(req.headers['last-event-id']);
  const frameId = typeof id === 'number' ? id : Number.isSafeInteger(last) && last >= 0 ? last + 1 : 0;
  void reply.code(200).header('content-type', 'text/event-stream; charset=utf-8').header('cache-control', 'no-cache, no-transform').send(formatSseFrame(frameId, parsed.data));
  return true;
}
