import type { FastifyBaseLogger } from 'fastify';
import { pino, type Logger } from 'pino';
import { describe, expect, it } from 'vitest';
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
    const req = lazyChildLoggerFactory(root as unknown as FastifyBaseLogger, { correlation_id: 'c1' }, {});
    (req as unknown as Logger).child({ task_id: 't1' }).info('task line');
    req.debug('hidden');
    const quiet = lazyChildLoggerFactory(root as unknown as FastifyBaseLogger, { correlation_id: 'c2' }, { level: 'warn' });
    quiet.info('hidden too');
    quiet.warn('shown');
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ correlation_id: 'c1', task_id: 't1', msg: 'task line' }),
      expect.objectContaining({ correlation_id: 'c2', msg: 'shown' }),
    ]);
  });
});
