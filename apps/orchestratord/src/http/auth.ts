import { hash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { UnauthorizedError } from '../errors.js';

export interface AuthOptions {
  /** Expected Bearer token; undefined = no auth (config only allows that on loopback binds). */
  token: string | undefined;
  /** Paths served without auth. @default ['/metrics'] */
  openPaths?: readonly string[];
  /** Path prefixes served without auth (the docs page's assets). @default [] */
  openPrefixes?: readonly string[];
}

function digest(s: string): Buffer {
  return hash('sha256', s, 'buffer');
}

/**
 * Constant-time token check. Both sides are hashed first, so tokens of different lengths are
 * compared in the same time as equal-length ones (timingSafeEqual needs equal lengths).
 */
export function tokenMatches(given: string, expected: string): boolean {
  return tokenMatcher(expected)(given);
}

/** {@link tokenMatches} with the expected side hashed once; each check is one one-shot `hash()` of the given token. */
function tokenMatcher(expected: string): (given: string) => boolean {
  const want = digest(expected);
  return (given) => timingSafeEqual(digest(given), want);
}

const BEARER = /^Bearer +([^\s]+) *$/i;

const auth: FastifyPluginAsync<AuthOptions> = async (app, opts) => {
  const expected = opts.token;
  if (expected === undefined) return;
  const open = new Set(opts.openPaths ?? ['/metrics']);
  const openPrefixes = opts.openPrefixes ?? [];
  const matches = tokenMatcher(expected);
  // Callback-style: no promise or microtask turn per request.
  app.addHook('onRequest', (req, _reply, done) => {
    const q = req.url.indexOf('?');
    const path = q < 0 ? req.url : req.url.slice(0, q);
    if (open.has(path) || openPrefixes.some((p) => path.startsWith(p))) {
      done();
      return;
    }
    const header = req.headers.authorization;
    const m = typeof header === 'string' && header.length <= 8192 ? BEARER.exec(header) : null;
    if (m === null || m[1] === undefined || !matches(m[1])) {
      req.log.warn({ path, has_authorization: header !== undefined }, 'unauthorized request');
      done(new UnauthorizedError(m === null ? 'missing bearer token' : 'invalid bearer token'));
      return;
    }
    done();
  });
};

export const authPlugin = fp(auth, { name: 'auth', fastify: '5.x', dependencies: ['correlation'] });
