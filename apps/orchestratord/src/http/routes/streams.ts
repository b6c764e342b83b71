import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { InvalidParamsError, NotFoundError } from '../../errors.js';
import { V2_SSE, V2_SSE_VERBOSE } from '../../streams/frame-encoder.js';
import type { ServicesOptions } from '../app-services.js';
import { mayAccess } from '../task-access.js';
import { serveTaskEvents } from '../task-streams.js';

const TaskParams = z.object({ id: z.string() });
const StreamQuery = z.object({
  verbose: z.enum(['true', 'false', '1', '0']).optional(),
  last_event_id: z.string().optional(),
});

function parseLastEventId(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  if (!/^\d{1,9}$/.test(value))
    throw new InvalidParamsError(`Last-Event-ID: '${value}' is not a frame id (non-negative integer)`);
  return Number(value);
}

/**
 * `GET /v2/tasks/{id}/events` (SSE relay) and `POST /v2/tasks/{id}/cancel`, for the key that
 * admitted the task and operator keys; any other key gets the 404 of an unknown id (task-access.ts).
 * A task another replica owns (Redis store) is answered by that replica (http/task-owner-proxy.ts).
 * Disconnect = cancel: when the last subscriber of an unfinished task goes away, the task is
 * canceled (upstream request aborted, engine slot freed); a later resume reads its `end {canceled}`.
 */
export const streamRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  const { tasks, config } = services;

  // No HEAD twin: a probe that opened and closed the stream would cancel the task.
  app.get(
    '/v2/tasks/:id/events',
    { exposeHeadRoute: false, schema: { params: TaskParams, querystring: StreamQuery } },
    async (req, reply) => {
      const notFound = () =>
        new NotFoundError(
          `task '${req.params.id}' not found (unknown, or ended more than ${config.stream_grace_ms} ms ago)`,
        );
      let task = tasks.get(req.params.id);
      if (task !== undefined && !mayAccess(req.principal, task.clientKey)) throw notFound();
      if (task === undefined) {
        const forwarded = (await services.owners?.forward(req, reply, req.params.id)) ?? 'absent';
        if (forwarded === 'answered') return reply;
        // `taken`: its owner was dead and this replica took the task over: served from here
        if (forwarded === 'taken') task = tasks.get(req.params.id);
        if (task === undefined) throw notFound();
      }
      const header = req.headers['last-event-id'];
      const afterId = parseLastEventId(typeof header === 'string' ? header.trim() : req.query.last_event_id);
      const verbose = req.query.verbose === 'true' || req.query.verbose === '1';
      req.log.debug({ task_id: task.id, verbose, after_id: afterId }, 'stream subscriber attached');
      serveTaskEvents(services, req, reply, task, { encoder: verbose ? V2_SSE_VERBOSE : V2_SSE, afterId });
    },
  );

  // A plain function, like admission's: no promise per cancel.
  app.post('/v2/tasks/:id/cancel', { schema: { params: TaskParams } }, (req, reply) => {
    // Made only when thrown: an error's stack trace costs more than the rest of a cancel.
    const notFound = () => new NotFoundError(`task '${req.params.id}' not found`);
    const task = tasks.get(req.params.id);
    if (task !== undefined && !mayAccess(req.principal, task.clientKey)) throw notFound();
    const result = tasks.cancel(req.params.id, 'client');
    if (result !== 'unknown') return void reply.code(204).send();
    if (services.owners === undefined) throw notFound();
    // Another replica may own it (Redis store): it cancels it there.
    return services.owners.forward(req, reply, req.params.id).then((forwarded) => {
      if (forwarded === 'answered') return reply;
      // its owner was dead and this replica took the task over: cancelled here
      if (forwarded === 'taken' && tasks.cancel(req.params.id, 'client') !== 'unknown') return reply.code(204).send();
      throw notFound();
    });
  });
};
