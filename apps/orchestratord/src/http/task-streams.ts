import { CORRELATION_ID_HEADER, type ErrorEvent } from '@llama-orch/contracts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FrameEncoder } from '../streams/frame-encoder.js';
import { TaskEventStream } from '../streams/task-event-stream.js';
import type { RetainedTask, TaskRecord } from '../tasks/task-record.js';
import type { AppServices } from './app-services.js';

/** How one client reads a task's frames (see {@link serveTaskEvents}). */
export interface TaskReader {
  encoder: FrameEncoder;
  /** Resume after this frame id (`Last-Event-ID`). */
  afterId?: number | undefined;
  /** The head waits for the first frame written, so that `onRefused` can still answer with a status. */
  lazyHead?: boolean;
  onRefused?: (err: ErrorEvent) => void;
}

/** How long a /v2 task with no reader waits for a resume before it is cancelled, with replicas, ms. */
const RESUME_GRACE_MS = 2000;

/**
 * Disconnect = cancel, for every door: what runs when a task's last reader left before its end
 * (the upstream request is aborted, the engine's slot freed; a later resume reads `end {canceled}`).
 */
export function abandonTask(services: AppServices, req: FastifyRequest, task: TaskRecord | RetainedTask): () => void {
  return () => {
    req.log.debug({ task_id: task.id }, 'last stream subscriber left');
    // A task taken over from a dead replica runs to its end (or deadline): its client reconnects
    // through any replica, one attempt at a time, and one leaving is no cancel (spec 65, Orphans).
    if ('takenOver' in task && task.takenOver === true) return;
    // A detached task (a background Response) runs until it ends or is cancelled explicitly.
    if ('detached' in task && task.detached === true) return;
    // With replicas, a /v2 reader may have left only because the replica it read through died: the
    // cancel waits a moment for its reconnect (Last-Event-ID), which a client that left never makes.
    if (services.owners !== undefined && 'delivery' in task && task.delivery === 'events') {
      const stream = task.stream;
      setTimeout(() => {
        if (stream.state === 'open' && stream.subscriberCount === 0) services.tasks.cancel(task.id, 'disconnect');
      }, RESUME_GRACE_MS).unref();
      return;
    }
    services.tasks.cancel(task.id, 'disconnect');
  };
}

/** Answers `req` with the task's frames as a `TaskEventStream` through the door's encoder. */
export function serveTaskEvents(
  services: AppServices,
  req: FastifyRequest,
  reply: FastifyReply,
  task: TaskRecord | RetainedTask,
  reader: TaskReader,
): void {
  reply.hijack();
  new TaskEventStream({
    res: reply.raw,
    stream: task.stream,
    encoder: reader.encoder,
    afterId: reader.afterId,
    lazyHead: reader.lazyHead,
    onRefused: reader.onRefused,
    keepaliveMs: services.config.sse_keepalive_ms,
    headers: { [CORRELATION_ID_HEADER]: req.id },
    onAbandoned: abandonTask(services, req, task),
  });
}
