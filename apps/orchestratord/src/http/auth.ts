import { timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { sha256, type Credential, type Credentials, type Role } from './credentials.js';
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
 * operator routes (changes to the cluster, the node list) an operator key; everything else —
 * tasks, /v1, sessions, reads of pools, capabilities and catalog, unknown routes — a client or
 * operator key. Keyed by `METHOD route-pattern`.
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
});

export function requiredRole(method: string, routeUrl: string | undefined): Role {
  return (routeUrl !== undefined ? ROUTE_ROLES[`${method} ${routeUrl}`] : undefined) ?? 'client';
}

function allows(have: Role, need: Role): boolean {
  if (need === 'node') return have === 'node';
  if (need === 'operator') return have === 'operator';
  return have === 'client' || have === 'operator';
}

/** Constant-time token check: both sides hashed first, so any lengths compare in the same time. */
export function tokenMatches(given: string, expected: string): boolean {
  return timingSafeEqual(sha256(given), sha256(expected));
}

/**
 * The credential a token is: its SHA-256 looks up the candidate (a digest reveals nothing about
 * the key), then `timingSafeEqual` confirms it. One hash per request, whatever the number of keys.
 */
function credentialLookup(creds: Credentials): (token: string) => Credential | undefined {
  const byDigest = new Map<string, Credential[]>();
  for (const c of creds.keys) {
    const hex = c.digest.toString('hex');
    byDigest.set(hex, [...(byDigest.get(hex) ?? []), c]);
  }
  return (token) => {
    const d = sha256(token);
    const found = byDigest.get(d.toString('hex'));
    return found?.[0] !== undefined && timingSafeEqual(d, found[0].digest) ? found[0] : undefined;
  };
}

const BEARER = /^Bearer +([^\s]+) *$/i;

function pathOf(req: FastifyRequest): string {
  const q = req.url.indexOf('?');
  return q < 0 ? req.url : req.url.slice(0, q);
}

const auth: FastifyPluginAsync<AuthOptions> = async (app, opts) => {
  app.decorateRequest('principal', undefined);
  if (opts.credentials.keys.length === 0) return;
  const open = new Set(opts.openPaths ?? ['/metrics']);
  const openPrefixes = opts.openPrefixes ?? [];
  const lookup = credentialLookup(opts.credentials);
  // The same token may be two credentials (LLORCH_API_TOKEN as operator and node): the one whose
  // role the route needs wins.
  const byName = new Map(opts.credentials.keys.map((c) => [c.name, c]));
  const nodeTwin = byName.get('node');
  // Callback-style: no promise or microtask turn per request.
  app.addHook('onRequest', (req, _reply, done) => {
    const path = pathOf(req);
    if (open.has(path) || openPrefixes.some((p) => path.startsWith(p))) {
      done();
      return;
    }
    const header = req.headers.authorization;
    const m = typeof header === 'string' && header.length <= 8192 ? BEARER.exec(header) : null;
    let cred = m?.[1] !== undefined ? lookup(m[1]) : undefined;
    if (cred === undefined) {
      req.log.warn({ path, has_authorization: header !== undefined }, 'unauthorized request');
      done(new UnauthorizedError(m === null ? 'missing bearer token' : 'invalid bearer token'));
      return;
    }
    const need = requiredRole(req.method, req.routeOptions.url);
    if (need === 'node' && cred.role !== 'node' && nodeTwin !== undefined && nodeTwin.digest.equals(cred.digest)) cred = nodeTwin;
    if (!allows(cred.role, need)) {
      req.log.warn({ path, key: cred.name, role: cred.role, needs: need }, 'forbidden request');
      done(new ForbiddenError(`this key (${cred.role}) cannot call ${req.method} ${path}: it needs a ${need} credential`));
      return;
    }
    req.principal = { name: cred.name, role: cred.role, maxPriority: cred.maxPriority, ...(cred.rateLimit !== undefined ? { rateLimit: cred.rateLimit } : {}) };
    done();
  });
};

export const authPlugin = fp(auth, { name: 'auth', fastify: '5.x', dependencies: ['correlation'] });
