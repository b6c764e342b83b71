import rateLimit from '@fastify/rate-limit';
import type { TaskRequest } from '@llama-orch/contracts';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, type Registry } from 'prom-client';
import { RateLimitedError } from '../errors.js';
import type { RateLimitStore } from '../store/rate-limit-store.js';
import { rateLimitStoreClass } from './rate-limit-store-adapter.js';

export interface ClientKeysOptions {
  registry: Registry;
  /** Whether any key has a `rate_limit`; without one the limiter is not installed (no per-request hook). */
  rateLimited: boolean;
  /** Where requests are counted: the cluster store's (one count across replicas with Redis). */
  rateLimits: RateLimitStore;
}

/** Window of a key's `rate_limit` (requests per minute). */
const WINDOW_MS = 60_000;

/**
 * Per-key limits and counters, after auth (which sets `req.principal`):
 * - `rate_limit`: `@fastify/rate-limit` keyed by the key's name (a key used from many addresses is
 *   one bucket), counted in the cluster store (in this process by default; with Redis, once for
 *   every replica: 60 a minute is 60 across 3 replicas, not 180); past it 429 ADMISSION_REJECT (`policy_label: rate_limit`) with
 *   `Retry-After` — an ErrorEnvelope on /v2, OpenAI's error body on /v1 (the one error handler).
 *   Keys without a limit, open routes and auth-off requests are not counted against anything.
 * - `llorch_client_requests_total{key}`: answered requests per key name (bounded: the names of
 *   the keys file, `default`, `node`).
 */
const clientKeys: FastifyPluginAsync<ClientKeysOptions> = async (app, { registry, rateLimited, rateLimits }) => {
  const requests = new Counter({
    name: 'llorch_client_requests_total',
    help: 'Requests answered, by client key name',
    labelNames: ['key'],
    registers: [registry],
  });
  if (rateLimited)
    await app.register(rateLimit, {
      global: true,
      hook: 'preHandler',
      timeWindow: WINDOW_MS,
      store: rateLimitStoreClass(rateLimits),
      keyGenerator: (req: FastifyRequest) => req.principal?.name ?? '',
      allowList: (req: FastifyRequest) => req.principal?.rateLimit === undefined,
      max: (req: FastifyRequest) => req.principal?.rateLimit ?? 0,
      errorResponseBuilder: (req, ctx) =>
        new RateLimitedError(
          `key '${req.principal?.name ?? ''}' is over its rate limit of ${ctx.max} requests per minute`,
          { retryAfterMs: ctx.ttl },
        ),
    });
  app.addHook('onResponse', (req, _reply, done) => {
    if (req.principal !== undefined) requests.inc({ key: req.principal.name });
    done();
  });
};

export const clientKeysPlugin = fp(clientKeys, {
  name: 'client-keys',
  fastify: '5.x',
  dependencies: ['auth', 'errors'],
});

/** The task as its key may run it: a key whose `max_priority` is `batch` never gets the interactive lane. */
export function withPriorityCeiling(task: TaskRequest, req: FastifyRequest): TaskRequest {
  return req.principal?.maxPriority === 'batch' && task.priority !== 'batch' ? { ...task, priority: 'batch' } : task;
}
