import swagger, { type StaticDocumentSpec } from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyPluginAsync } from 'fastify';
import document from './openapi.json' with { type: 'json' };

/** Paths served without a token: documentation is not a secret (the routes it describes still need one). */
export const DOCS_PATHS = ['/openapi.json', '/docs'] as const;
/** Prefix of the docs page's own assets and JSON (`/docs/static/…`, `/docs/json`). */
export const DOCS_PREFIX = '/docs/';

/**
 * `GET /openapi.json` (the generated document of every orchestratord route, /v1 included:
 * `openapi.json` beside this file, written by `pnpm contracts:gen` from packages/contracts and
 * checked by its drift test) and a Swagger UI page at `/docs` whose scripts and styles are served
 * from the installed package (no CDN, no network). Encapsulated: `swagger()` stays in here.
 */
export const apiDocsPlugin: FastifyPluginAsync = async (app) => {
  // Unavoidable: a JSON module's strings are typed `string`, not OpenAPI's literals; the file is generated from the contracts' schemas and checked by their drift test.
  await app.register(swagger, {
    mode: 'static',
    specification: { document: document as unknown as StaticDocumentSpec['document'] },
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    // Swagger UI would otherwise send the document to validator.swagger.io for a badge.
    uiConfig: { validatorUrl: null, deepLinking: true },
  });
  app.get('/openapi.json', { schema: { hide: true } }, (_req, reply) => {
    void reply.header('cache-control', 'no-cache').send(app.swagger());
  });
};
