import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { sendError } from './error-envelope.js';

export interface AuthOptions {
  /** Bearer token; undefined disables auth (main allows that only on a loopback bind). */
  token: string | undefined;
  /** Routes (as registered) that need no token. */
  publicRoutes: readonly string[];
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/** Bearer auth on every route but the public ones; timing-safe compare; JSON 401. */
export const authPlugin = fp<AuthOptions>(
  async (app: FastifyInstance, opts) => {
    if (opts.token === undefined) return;
    const expected = digest(opts.token);
    const open = new Set(opts.publicRoutes);
    // Callback-style: no promise per request (performance notes: request hooks). Replying here
    // ends the request: done() is not called then.
    app.addHook('onRequest', (request, reply, done) => {
      if (open.has(request.routeOptions.url ?? '')) {
        done();
        return;
      }
      const header = request.headers.authorization ?? '';
      const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
      // Hashing first makes both buffers equal-length, as timingSafeEqual needs.
      if (m?.[1] === undefined || !timingSafeEqual(digest(m[1]), expected)) {
        void sendError(reply, 'UNAUTHORIZED', 'missing or invalid Bearer token');
        return;
      }
      done();
    });
  },
  { name: 'auth', dependencies: ['error-handler'] },
);
