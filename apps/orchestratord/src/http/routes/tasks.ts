import { TaskInfoSchema, TaskListQuerySchema, TaskListSchema } from '@llama-orch/contracts';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { NotFoundError } from '../../errors.js';
import type { ServicesOptions } from '../app-services.js';
import { mayAccess } from '../task-access.js';

const TaskParams = z.object({ id: z.string() });

/**
 * `GET /v2/tasks/{id}` (TaskInfo) and `GET /v2/tasks` (TaskList), on any replica: a task's record
 * from admission until `task_retention_ms` after its end (.specs/60-orchestratord.md, Task
 * records). A client key sees only the tasks it admitted — another key's task is the 404 of an
 * unknown id, and its list holds only its own; operator keys see every task.
 */
export const taskRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  const { taskRecords, config } = services;

  app.get(
    '/v2/tasks/:id',
    { schema: { params: TaskParams, response: { 200: TaskInfoSchema } } },
    async (req, reply) => {
      const { id } = req.params;
      const notFound = () =>
        new NotFoundError(`task '${id}' not found (unknown, or ended more than ${config.task_retention_ms} ms ago)`);
      const found = await taskRecords.get(id);
      if (found === undefined || !mayAccess(req.principal, found.clientKey)) throw notFound();
      // Live on another replica: its owner answers with the live view (queue position, tokens).
      const elsewhere = found.owner !== undefined && found.owner !== services.replicas.identity.replicaId;
      if (elsewhere && found.info.state !== 'ended' && services.owners !== undefined) {
        const forwarded = await services.owners.forward(req, reply, id, { fromRecord: false });
        if (forwarded === 'answered') return reply;
        // taken over here, or ended meanwhile: read again
        return (await taskRecords.get(id))?.info ?? found.info;
      }
      return found.info;
    },
  );

  app.get(
    '/v2/tasks',
    { schema: { querystring: TaskListQuerySchema, response: { 200: TaskListSchema } } },
    async (req) => {
      const q = req.query;
      const principal = req.principal;
      return taskRecords.list({
        state: q.state,
        model: q.model,
        priority: q.priority,
        since: q.since,
        limit: q.limit,
        cursor: q.cursor,
        // a client key lists its own tasks; an operator key (or auth off) everyone's
        clientKey: principal === undefined || principal.role === 'operator' ? undefined : principal.name,
      });
    },
  );
};
