import cors from '@fastify/cors';
import { CORRELATION_ID_HEADER } from '@llama-orch/contracts';
import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';

export interface CorsOptions {
  /** Allowed browser origins (`*` = any); empty = CORS off (no headers at all). */
  origins: readonly string[];
}

/** Response headers a browser script may read: the correlation id and the backoff hints of 429/503. */
export const CORS_EXPOSED_HEADERS = [CORRELATION_ID_HEADER, 'Retry-After', 'X-Backoff-Ms'] as const;
/**
 * Request headers a browser script may send (Authorization carries the Bearer key; the Anthropic
 * door also takes it as X-Api-Key, next to Anthropic-Version, which its clients always send).
 */
export const CORS_ALLOWED_HEADERS = [
  'Authorization',
  'Content-Type',
  'Accept',
  CORRELATION_ID_HEADER,
  'X-Session-Id',
  'Last-Event-ID',
  'X-Api-Key',
  'Anthropic-Version',
] as const;

/**
 * CORS for browser clients (`ORCHD_CORS_ORIGINS`), on every route (/v2, /v1, docs). Registered
 * before auth: a preflight carries no Authorization and is answered (204) in its onRequest hook,
 * before the token check; an actual request from an allowed origin gets its headers on every
 * answer, 401s and errors included, so the page can read them. A disallowed origin gets no
 * `Access-Control-Allow-Origin` (the browser refuses the response).
 */
const corsPlugin: FastifyPluginAsync<CorsOptions> = async (app, { origins }) => {
  if (origins.length === 0) return;
  await app.register(cors, {
    origin: origins.includes('*') ? '*' : [...origins],
    methods: ['GET', 'POST', 'DELETE'],
    allowedHeaders: [...CORS_ALLOWED_HEADERS],
    exposedHeaders: [...CORS_EXPOSED_HEADERS],
    maxAge: 600,
    // Bearer keys travel in Authorization, never in cookies.
    credentials: false,
  });
};

export const corsOriginsPlugin = fp(corsPlugin, {
  name: 'cors-origins',
  fastify: '5.x',
  dependencies: ['correlation'],
});
