import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';

/** `GET /metrics`: Prometheus text of the app's own registry (no auth). */
export async function metricsRoute(app: FastifyInstance, opts: { registry: Registry }): Promise<void> {
  app.get('/metrics', async (_request, reply) => {
    const text = await opts.registry.metrics();
    return reply.type(opts.registry.contentType).send(text);
  });
}
