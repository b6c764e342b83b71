import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import fastifyStatic from '@fastify/static';
import { CORRELATION_ID_HEADER, DashboardSnapshotSchema, type DashboardSnapshot } from '@llama-orch/contracts';
import { dashboardBuilt } from '@llama-orch/dashboard';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { SnapshotStream, snapshotEvent } from '../../dashboard/snapshot-stream.js';
import { InternalError } from '../../errors.js';
import type { ServicesOptions } from '../app-services.js';

/** The page's paths, served without a token (the page asks for the key itself). */
export const DASHBOARD_PAGE_PATHS = ['/', '/dashboard'] as const;
/** Prefix of the page's files (Vite builds with `base: '/dashboard/'`). */
export const DASHBOARD_ASSETS_PREFIX = '/dashboard/';

export interface DashboardRoutesOptions extends ServicesOptions {
  /** Folder of the built page (`index.html` + `assets/`). */
  dir: string;
}

/** Vite's hashed file names change with their content: cache them for good; everything else revalidates. */
function cacheControlFor(path: string): string {
  return /[/\\]assets[/\\]/.test(path) ? 'public, max-age=31536000, immutable' : 'no-cache';
}

function isMissingFile(err: unknown): boolean {
  return err instanceof Error && 'code' in err && (err.code === 'ENOENT' || err.code === 'ENOTDIR');
}

/**
 * The web dashboard: `GET /v2/dashboard` (one snapshot), `GET /v2/dashboard/events` (a snapshot on
 * connect and after every change the feed reports: pushed, the page never polls), both behind the
 * key; and the page itself, open: `GET /` (its `index.html`, `Cache-Control: no-cache`),
 * `/dashboard/*` (its files, `@fastify/static`) and `GET /dashboard` (→ `/`). The page's drain and
 * reload buttons call `POST /v2/pools/{id}/drain|reload` (control routes, operator key).
 *
 * Open event streams are ended in `preClose`: Fastify's close waits for every connection, and a
 * dashboard left open in a browser would otherwise hold the shutdown until its grace runs out.
 */
export const dashboardRoutes: FastifyPluginAsyncZod<DashboardRoutesOptions> = async (app, { services, dir }) => {
  const { dashboard, config } = services;
  const open = new Set<SnapshotStream>();
  let closing = false;
  let unsubscribe: (() => void) | undefined;
  // One serialisation per snapshot, whatever the number of open pages.
  // Streams that got a pushed snapshot: their first one (read from the store, async) would be older.
  const pushed = new WeakSet<SnapshotStream>();
  const broadcast = (snapshot: DashboardSnapshot): void => {
    const text = snapshotEvent(snapshot);
    for (const s of open) {
      pushed.add(s);
      s.send(text);
    }
  };

  app.get('/v2/dashboard', { schema: { response: { 200: DashboardSnapshotSchema } } }, () => dashboard.snapshot());

  app.get('/v2/dashboard/events', { exposeHeadRoute: false }, (req, reply) => {
    if (closing) throw new InternalError('orchestratord is shutting down', { retriable: true, retryAfterMs: 1000 });
    reply.hijack();
    const stream = new SnapshotStream({
      res: reply.raw,
      keepaliveMs: config.sse_keepalive_ms,
      headers: { [CORRELATION_ID_HEADER]: req.id },
      onEnd: () => {
        open.delete(stream);
        if (open.size === 0) {
          unsubscribe?.();
          unsubscribe = undefined;
        }
        req.log.debug({ open: open.size }, 'dashboard stream ended');
      },
    });
    open.add(stream);
    unsubscribe ??= dashboard.subscribe(broadcast);
    dashboard.snapshot().then(
      (snap) => {
        if (!pushed.has(stream)) stream.send(snapshotEvent(snap));
      },
      // The stream stays open: the next change or bucket end sends one.
      (err: unknown) => req.log.warn({ err }, 'dashboard snapshot failed'),
    );
    req.log.debug({ open: open.size }, 'dashboard stream opened');
  });

  app.addHook('preClose', async () => {
    closing = true;
    for (const s of [...open]) s.end();
  });

  app.get('/', { schema: { hide: true } }, async (_req, reply) => {
    let html: Buffer;
    try {
      html = await readFile(join(dir, 'index.html'));
    } catch (err) {
      if (!isMissingFile(err)) throw err;
      throw new InternalError(
        `the dashboard page is not built (no index.html in ${dir}); run \`pnpm build\` and reload`,
        { retriable: false },
      );
    }
    return reply.header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-cache').send(html);
  });

  app.get('/dashboard', { schema: { hide: true } }, (_req, reply) => reply.redirect('/', 302));

  // Built later (a running daemon while `pnpm build` runs) is fine: files are looked up per request.
  if (!dashboardBuilt(dir))
    app.log.info({ dir }, 'dashboard page not built: / answers an error until `pnpm build` builds it');
  await app.register(fastifyStatic, {
    root: dir,
    prefix: DASHBOARD_ASSETS_PREFIX,
    decorateReply: false,
    suppressWarning: true,
    setHeaders: (reply, path) => {
      void reply.header('cache-control', cacheControlFor(path));
    },
  });
};
