import { LivenessSchema, ReadinessSchema, type Readiness } from '@llama-orch/contracts';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

export interface ProbeOptions {
  /** Current readiness (cheap: two flags). */
  readiness: () => Readiness;
}

/** Paths the probes answer on (no auth: load balancers, kubelets and watchdogs carry no token). */
export const PROBE_PATHS = ['/healthz', '/readyz'] as const;

/**
 * `GET /healthz` (the process serves) and `GET /readyz` (it can admit: listening and not shutting
 * down; 503 otherwise). Both answer from memory, without touching the registry or the queue.
 */
export const probeRoutes: FastifyPluginAsyncZod<ProbeOptions> = async (app, { readiness }) => {
  app.get('/healthz', { schema: { response: { 200: LivenessSchema } } }, (_req, reply) => {
    void reply.header('cache-control', 'no-store').send({ status: 'ok' as const });
  });
  app.get('/readyz', { schema: { response: { 200: ReadinessSchema, 503: ReadinessSchema } } }, (_req, reply) => {
    const r = readiness();
    if (r.status !== 'ready') void reply.code(503).header('retry-after', '1');
    void reply.header('cache-control', 'no-store').send(r);
  });
};
