import { acceptsOpenMetrics, OPENMETRICS_CONTENT_TYPE, openMetricsText } from '@llama-orch/daemon-support';
import type { FastifyPluginAsync } from 'fastify';
import type { ServicesOptions } from '../app-services.js';

/**
 * `GET /metrics` (no auth; see the auth plugin): Prometheus text from the app's own registry, or
 * OpenMetrics when the scraper asks for it (`Accept: application/openmetrics-text`), which carries
 * the TTFT and decode histograms' exemplars: the trace id of a task observed in each bucket.
 */
export const metricsRoutes: FastifyPluginAsync<ServicesOptions> = async (app, { services }) => {
  app.get('/metrics', async (req, reply) => {
    const registry = services.metricsRegistry;
    if (acceptsOpenMetrics(req.headers.accept))
      return reply.type(OPENMETRICS_CONTENT_TYPE).send(await openMetricsText(registry));
    return reply.type(registry.contentType).send(await registry.metrics());
  });
};
