import type { FastifyPluginAsync } from 'fastify';

/** Served without a token: documentation is not a secret (the routes it describes still need one). */
export const OPENAPI_PATH = '/openapi.json';

/**
 * `GET /openapi.json`: pool-managerd's OpenAPI document (`openapi.json` beside this file, written by
 * `pnpm contracts:gen` from packages/contracts and checked by its drift test). Imported on the first
 * request, not at start (the daemon's start-up is kept short; see performance notes: engines before
 * the HTTP stack); the bundle carries it, so no file is read at run time.
 */
export const openApiRoute: FastifyPluginAsync = async (app) => {
  let text: Promise<string> | undefined;
  app.get(OPENAPI_PATH, async (_request, reply) => {
    text ??= import('./openapi.json', { with: { type: 'json' } }).then((m) => JSON.stringify(m.default));
    return reply
      .type('application/json; charset=utf-8')
      .header('cache-control', 'no-cache')
      .send(await text);
  });
};
