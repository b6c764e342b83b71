import { randomUUID } from 'node:crypto';
import { resolveTaskRequest, TaskRequestSchema, type AdmissionResponse } from '@llama-orch/contracts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { V2_SSE } from '../../streams/frame-encoder.js';
import { withPriorityCeiling } from '../client-keys.js';
import type { AppServices, ServicesOptions } from '../app-services.js';
import { serveTaskEvents } from '../task-streams.js';

/**
 * Sends the 202. When admission dispatched the task at once, the reply goes out after that
 * dispatch: undici writes a request on a kept connection from `setImmediate` (HTTP/2 from a native
 * immediate), so an immediate queued now runs after it, and the node and engine start work while
 * the client reads the 202 and opens its stream (admission-order.test.ts holds the wire order).
 * A task that waits in the queue is answered at once.
 */
export function sendAdmission(reply: FastifyReply, body: AdmissionResponse, dispatched: boolean): void {
  if (dispatched) setImmediate(() => reply.code(202).send(body));
  else reply.code(202).send(body);
}

/** Whether the client asked for the event stream in the admission response itself. */
export function wantsEventStream(req: FastifyRequest): boolean {
  const accept = req.headers.accept;
  return typeof accept === 'string' && accept.includes('text/event-stream');
}

/**
 * Answers with the task's event stream, as `GET /v2/tasks/{id}/events` would (same frames, ids and
 * keep-alives), in the admission response: one request instead of two. Leaving is a disconnect
 * like any subscriber's: the last one gone cancels the task.
 */
export function streamAdmitted(services: AppServices, req: FastifyRequest, reply: FastifyReply, taskId: string): void {
  const task = services.tasks.get(taskId);
  if (task === undefined) throw new Error(`admitted task ${taskId} is not in the table`);
  serveTaskEvents(services, req, reply, task, { encoder: V2_SSE });
}

/**
 * `POST /v2/tasks`: validate, fill the defaults (ids, `max_tokens`, `deadline_ms` =
 * `ORCHD_DEFAULT_DEADLINE_MS`), check the model against the registry, enqueue, 202 with absolute
 * stream URLs — or, with `Accept: text/event-stream`, 200 with the task's event stream. The
 * body has no response schema (it is built from typed values; the OpenAPI document keeps the schema).
 */
export const admissionRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  app.post('/v2/tasks', { schema: { body: TaskRequestSchema } }, async (req, reply) => {
    const request = resolveTaskRequest(req.body, {
      deadlineMs: services.config.default_deadline_ms,
      newId: randomUUID,
    });
    const result = await services.tasks.admit(withPriorityCeiling(request, req), {
      log: req.log,
      correlationId: req.id,
      clientKey: req.principal?.name,
      traceParent: req.traceContext,
    });
    if (wantsEventStream(req)) {
      streamAdmitted(services, req, reply, result.task_id);
      return reply;
    }
    const base = `${services.publicBase(req)}/v2/tasks/${encodeURIComponent(result.task_id)}/events`;
    // Fields written out rather than spread: every 202 body has the same shape.
    const body: AdmissionResponse = {
      task_id: result.task_id,
      queue_position: result.queue_position,
      predicted_start_ms: result.predicted_start_ms,
      backoff_ms: result.backoff_ms,
      preparation: result.preparation,
      streams: { sse: base, sse_verbose: `${base}?verbose=true` },
    };
    sendAdmission(reply, body, result.dispatched);
    return reply;
  });
};
