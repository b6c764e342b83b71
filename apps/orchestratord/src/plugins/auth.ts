import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { UnauthorizedError } from '../errors.js';

export interface AuthOptions {
  /** Expected Bearer token; undefined = no auth (config only allows that on loopback binds). */
  token: string | undefined;
  /** Paths served without auth. @default ['/metrics'] */
  openPaths?: readonly string[];
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/**
 * Constant-time token check. Both sides are hashed first, so tokens of different lengths are
 * compared in the same time as equal-length ones (timingSafeEqual needs equal lengths).
 */
export function tokenMatches(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

const BEARER = /^Bearer +([^\s]+) *$/i;

const auth: FastifyPluginAsync<AuthOptions> = async (app, opts) => {
  const expected = opts.token;
  if (expected === undefined) return;
  const open = new Set(opts.openPaths ?? ['/metrics']);
  app.addHook('onRequest', async (req) => {
    const path = req.url.split('?', 1)[0] ?? '';
    if (open.has(path)) return;
    const header = req.headers.authorization;
    const m = typeof header === 'string' && header.length <= 8192 ? BEARER.exec(header) : null;
    if (m === null || m[1] === undefined || !tokenMatches(m[1], expected)) {
      req.log.warn({ path, has_authorization: header !== undefined }, 'unauthorized request');
      throw new UnauthorizedError(m === null ? 'missing bearer token' : 'invalid bearer token');
    }
  });
};

export const authPlugin = fp(auth, { name: 'auth', fastify: '5.x', dependencies: ['correlation'] });
