import Fastify, { LogController } from 'fastify';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { LazyChildLogger } from '../lazy-child-logger.js';
import { lazyChildLoggerFactory, ownOptions } from './request-logger.js';

describe('lazyChildLoggerFactory', () => {
  it('drops the empty options object Fastify passes per request; keeps one that sets something', () => {
    expect(ownOptions({})).toBeUndefined();
    expect(ownOptions({ level: undefined })).toBeUndefined();
    const own = { level: 'warn' };
    expect(ownOptions(own)).toBe(own);
  });

  it("a request logger made from empty options logs at the root level, with its bindings and its children's; a route level still applies", () => {
    const lines: string[] = [];
    const root = pino({ level: 'info' }, { write: (l: string) => lines.push(l) });
    const req = lazyChildLoggerFactory(root, { correlation_id: 'c1' }, {});
    expect(req).toBeInstanceOf(LazyChildLogger);
    req.child({ task_id: 't1' }).info('task line');
    req.debug('hidden');
    const quiet = lazyChildLoggerFactory(root, { correlation_id: 'c2' }, { level: 'warn' });
    quiet.info('hidden too');
    quiet.warn('shown');
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ correlation_id: 'c1', task_id: 't1', msg: 'task line' }),
      expect.objectContaining({ correlation_id: 'c2', msg: 'shown' }),
    ]);
  });

  it("is a Fastify app's request logger: lines carry the correlation id and the app logger's bindings; a route's own level applies", async () => {
    const lines: string[] = [];
    const root = pino({ level: 'info' }, { write: (l: string) => lines.push(l) });
    const app = Fastify({
      loggerInstance: root.child({ component: 'http' }),
      childLoggerFactory: lazyChildLoggerFactory,
      logController: new LogController({ disableRequestLogging: true }),
    });
    app.get('/', async (req) => {
      expect(req.log).toBeInstanceOf(LazyChildLogger);
      req.log.child({ task_id: 't1' }).info('handled');
      return {};
    });
    app.get('/quiet', { logLevel: 'warn' }, async (req) => {
      req.log.info('hidden');
      req.log.warn('shown');
      return {};
    });
    try {
      await app.inject({ url: '/' });
      await app.inject({ url: '/quiet' });
    } finally {
      await app.close();
    }
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ component: 'http', reqId: expect.any(String), task_id: 't1', msg: 'handled' }),
      expect.objectContaining({ component: 'http', reqId: expect.any(String), msg: 'shown' }),
    ]);
  });
});
