import type { FastifyPluginAsync } from 'fastify';
import type { ServicesOptions } from '../app-services.js';

/** `GET /metrics`: Prometheus text from the app's own registry (no auth; see the auth plugin). */
export const metricsRoutes: FastifyPluginAsync<ServicesOptions> = async (app, { services }) => {
  app.get('/metrics', async (_req, reply) => {
    const text = await services.metricsRegistry.metrics();
    return reply.type(services.metricsRegistry.contentType).send(text);
  });
};
