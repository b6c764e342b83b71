import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { LivenessSchema, ManagerReadinessSchema, type ManagerReadiness } from '@llama-orch/contracts';
import type { PoolManager } from '../pools/pool-manager.js';

/** Paths the probes answer on (no auth: load balancers, kubelets and watchdogs carry no token). */
export const PROBE_PATHS = ['/healthz', '/readyz'] as const;

/**
 * What `/readyz` answers: ready once the API listens, the manager runs and no pool of the node's
 * own is still in its first provisioning (a load on request coming up is not the node starting:
 * the node serves its other pools meanwhile). Failed pools are listed, not a reason to be not
 * ready (one broken model must not take the node's other pools out of rotation).
 */
export function managerReadiness(manager: PoolManager, listening: boolean): ManagerReadiness {
  const pools: ManagerReadiness['pools'] = {};
  const failed: string[] = [];
  const bringingUp: string[] = [];
  for (const s of manager.pools.statuses()) {
    const first = manager.pools.lifecycle(s.pool_id).firstProvisioning;
    pools[s.pool_id] = {
      state: s.state,
      first_provisioning: first,
      ...(s.last_error !== undefined && s.state === 'failed' ? { last_error: s.last_error } : {}),
    };
    if (s.state === 'failed') failed.push(s.pool_id);
    if (first && s.origin !== 'catalog') bringingUp.push(s.pool_id);
  }
  let reason: string | undefined;
  if (manager.state === 'closing' || manager.state === 'closed') reason = 'shutting down';
  else if (!listening) reason = 'not listening';
  else if (bringingUp.length > 0) reason = `pools still in their first provisioning: ${bringingUp.join(', ')}`;
  return {
    status: reason === undefined ? 'ready' : 'not_ready',
    node_id: manager.nodeId,
    ...(reason !== undefined ? { reason } : {}),
    pools,
    failed,
  };
}

/** `GET /healthz` (the process serves) and `GET /readyz` (see {@link managerReadiness}); both from memory. */
export const probeRoutes: FastifyPluginAsyncZod<{ manager: PoolManager }> = async (app, { manager }) => {
  app.get('/healthz', { schema: { response: { 200: LivenessSchema } } }, (_request, reply) => {
    void reply.header('cache-control', 'no-store').send({ status: 'ok' as const });
  });
  app.get(
    '/readyz',
    { schema: { response: { 200: ManagerReadinessSchema, 503: ManagerReadinessSchema } } },
    (_request, reply) => {
      const r = managerReadiness(manager, app.server.listening);
      if (r.status !== 'ready') void reply.code(503).header('retry-after', '1');
      void reply.header('cache-control', 'no-store').send(r);
    },
  );
};
