import { hash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginCallback, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

export function sha256(s: string): Buffer {
  return hash('sha256', s, 'buffer');
}

/** Constant-time token check: both sides hashed first, so any lengths compare in the same time. */
export function tokenMatches(given: string, expected: string): boolean {
  return timingSafeEqual(sha256(given), sha256(expected));
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
/** Longer `Authorization` headers are not parsed at all (no key is that long). */
const MAX_AUTHORIZATION = 8192;

/**
 * The token of an `Authorization: Bearer <token>` header (scheme in any case, one or more spaces or
 * tabs before the token, trailing blanks allowed); undefined when absent, malformed or over 8 KiB.
 */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined || header.length > MAX_AUTHORIZATION) return undefined;
  return BEARER.exec(header)?.[1];
}

/** A credential as the auth hook sees it: only the SHA-256 of its key. */
export interface BearerCredential {
  readonly digest: Buffer;
}

/**
 * The credential a token is: its SHA-256 looks up the candidate (a digest reveals nothing about
 * the key), then `timingSafeEqual` confirms it. One hash per request, whatever the number of keys;
 * the first of several credentials with one key wins.
 */
export function credentialLookup<C extends BearerCredential>(
  credentials: readonly C[],
): (token: string) => C | undefined {
  const byDigest = new Map<string, C>();
  for (const c of credentials) {
    const hex = c.digest.toString('hex');
    if (!byDigest.has(hex)) byDigest.set(hex, c);
  }
  return (token) => {
    const d = sha256(token);
    const found = byDigest.get(d.toString('hex'));
    return found !== undefined && timingSafeEqual(d, found.digest) ? found : undefined;
  };
}

export interface BearerAuthOptions<C extends BearerCredential = BearerCredential> {
  /** Accepted credentials; none = auth off (each daemon's config allows that only on a loopback bind). */
  credentials: readonly C[];
  /** Requests served without a token (metrics, probes, docs). */
  isOpen: (req: FastifyRequest) => boolean;
  /** The daemon's 401 error (its error handler answers with the envelope). */
  unauthorized: (reason: 'missing' | 'invalid') => Error;
  /**
   * The token of a request that has no `Authorization` header, from another place a door's clients
   * put it (Anthropic's `x-api-key`). @default none: only the Bearer header
   */
  altToken?: (req: FastifyRequest) => string | undefined;
  /**
   * After the token matched: an error to refuse the request (403), else undefined. A method, so its
   * parameter is bivariant: options for a daemon's own credential type are the plugin's options,
   * and the plugin calls it only with one of `credentials`. @default let it through
   */
  admit?(req: FastifyRequest, credential: C): Error | undefined;
}

const bearerAuth: FastifyPluginCallback<BearerAuthOptions> = (app, opts, done) => {
  if (opts.credentials.length > 0) {
    const lookup = credentialLookup(opts.credentials);
    // Callback-style: no promise or microtask turn per request.
    app.addHook('onRequest', (req, _reply, next) => {
      if (opts.isOpen(req)) {
        next();
        return;
      }
      const header = req.headers.authorization;
      const token = header === undefined ? opts.altToken?.(req) : bearerToken(header);
      const credential = token !== undefined ? lookup(token) : undefined;
      if (credential === undefined) {
        req.log.warn(
          { path: req.url.split('?', 1)[0], has_authorization: header !== undefined },
          'unauthorized request',
        );
        next(opts.unauthorized(token === undefined ? 'missing' : 'invalid'));
        return;
      }
      const refused = opts.admit?.(req, credential);
      if (refused !== undefined) next(refused);
      else next();
    });
  }
  done();
};

/**
 * Options for {@link bearerAuthPlugin} with the daemon's own credential type: `admit` gets the very
 * credential object the token matched (one of `credentials`).
 */
export function bearerAuthOptions<C extends BearerCredential>(options: BearerAuthOptions<C>): BearerAuthOptions {
  return options;
}

/**
 * Bearer auth on every request but the open ones, before routing to a handler: a missing,
 * malformed or unknown token is the daemon's 401, `admit` may refuse a known one (roles).
 */
export const bearerAuthPlugin = fp(bearerAuth, { name: 'bearer-auth', fastify: '5.x', dependencies: ['correlation'] });
