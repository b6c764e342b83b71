import { bearerAuthOptions, bearerAuthPlugin } from '@llama-orch/daemon-support';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Credential, Credentials, Role } from './credentials.js';
import { isAnthropicPath } from '../anthropic/anthropic-errors.js';
import { ForbiddenError, UnauthorizedError } from '../errors.js';

export interface AuthOptions {
  /** Accepted credentials; none = no auth (config only allows that on loopback binds). */
  credentials: Credentials;
  /** Paths served without auth. @default ['/metrics'] */
  openPaths?: readonly string[];
  /** Path prefixes served without auth (the docs page's assets). @default [] */
  openPrefixes?: readonly string[];
}

/** Who made a request: the credential's name, role and limits (undefined on open routes or with auth off). */
export type Principal = Pick<Credential, 'name' | 'role' | 'rateLimit' | 'maxPriority'>;

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook for every authenticated request. */
    principal: Principal | undefined;
  }
}

/**
 * Which role a route needs. Node routes (pool-managerd's calls) take only the node credential;
 * operator routes (changes to the cluster, the node list, the dashboard's data) an operator key;
 * everything else — tasks, /v1, sessions, reads of pools, capabilities and catalog, unknown
 * routes — a client or operator key (a client key then reaches only its own tasks and sessions:
 * task-access.ts). Keyed by `METHOD route-pattern`.
 */
export const ROUTE_ROLES: Readonly<Record<string, Exclude<Role, 'client'>>> = Object.freeze({
  'POST /v2/nodes/register': 'node',
  'POST /v2/nodes/:id/heartbeat': 'node',
  'DELETE /v2/nodes/:id': 'node',
  'GET /v2/nodes': 'operator',
  'POST /v2/pools/:id/drain': 'operator',
  'POST /v2/pools/:id/reload': 'operator',
  'POST /v2/catalog/models': 'operator',
  'DELETE /v2/catalog/models/:id': 'operator',
  'POST /v2/catalog/models/:id/load': 'operator',
  'POST /v2/catalog/models/:id/unload': 'operator',
  // every tenant's recent tasks: for operators only
  'GET /v2/dashboard': 'operator',
  'GET /v2/dashboard/events': 'operator',
});

export function requiredRole(method: string, routeUrl: string | undefined): Role {
  return (routeUrl !== undefined ? ROUTE_ROLES[`${method} ${routeUrl}`] : undefined) ?? 'client';
}

function allows(have: Role, need: Role): boolean {
  if (need === 'node') return have === 'node';
  if (need === 'operator') return have === 'operator';
  return have === 'client' || have === 'operator';
}

function pathOf(req: FastifyRequest): string {
  const q = req.url.indexOf('?');
  return q < 0 ? req.url : req.url.slice(0, q);
}

const auth: FastifyPluginAsync<AuthOptions> = async (app, opts) => {
  app.decorateRequest('principal', undefined);
  const open = new Set(opts.openPaths ?? ['/metrics']);
  const openPrefixes = opts.openPrefixes ?? [];
  // The same token may be two credentials (LLORCH_API_TOKEN as operator and node): the one whose
  // role the route needs wins.
  const nodeTwin = opts.credentials.keys.find((c) => c.name === 'node');
  await app.register(
    bearerAuthPlugin,
    bearerAuthOptions({
      credentials: opts.credentials.keys,
      isOpen: (req) => {
        const path = pathOf(req);
        return open.has(path) || openPrefixes.some((p) => path.startsWith(p));
      },
      // Anthropic's clients send the key as `x-api-key`; the same keys work there as a Bearer token.
      altToken: (req) => {
        const key = req.headers['x-api-key'];
        return typeof key === 'string' && key.length <= 8192 && isAnthropicPath(req.url) ? key.trim() : undefined;
      },
      unauthorized: (reason) =>
        new UnauthorizedError(
          reason === 'missing' ? 'missing bearer token (or x-api-key on /v1/messages)' : 'invalid bearer token',
        ),
      admit: (req, matched) => {
        let cred = matched;
        const need = requiredRole(req.method, req.routeOptions.url);
        if (need === 'node' && cred.role !== 'node' && nodeTwin !== undefined && nodeTwin.digest.equals(cred.digest))
          cred = nodeTwin;
        if (!allows(cred.role, need)) {
          const path = pathOf(req);
          req.log.warn({ path, key: cred.name, role: cred.role, needs: need }, 'forbidden request');
          return new ForbiddenError(
            `this key (${cred.role}) cannot call ${req.method} ${path}: it needs a ${need} credential`,
          );
        }
        req.principal = {
          name: cred.name,
          role: cred.role,
          maxPriority: cred.maxPriority,
          ...(cred.rateLimit !== undefined ? { rateLimit: cred.rateLimit } : {}),
        };
        return undefined;
      },
    }),
  );
};

export const authPlugin = fp(auth, { name: 'auth', fastify: '5.x', dependencies: ['correlation'] });
