import { pino, type Logger } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { LazyChildLogger } from './lazy-child-logger.js';

function capture(level: string): { logger: Logger; records: () => Record<string, unknown>[] } {
  const lines: string[] = [];
  const logger = pino({ level }, { write: (l: string) => lines.push(l) });
  return { logger, records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe('LazyChildLogger', () => {
  it("logs with its bindings and its children's, merged into one child", () => {
    const c = capture('info');
    const req = new LazyChildLogger(c.logger, { correlation_id: 'c1' });
    const task = req.child({ task_id: 't1' });
    task.info({ n: 1 }, 'task line');
    req.info('request line');
    req.info('with %s', 'args');
    expect(c.records()).toEqual([
      expect.objectContaining({ correlation_id: 'c1', task_id: 't1', n: 1, msg: 'task line' }),
      expect.objectContaining({ correlation_id: 'c1', msg: 'request line' }),
      expect.objectContaining({ correlation_id: 'c1', msg: 'with args' }),
    ]);
    expect(c.records()[1]).not.toHaveProperty('task_id');
  });

  it('builds no pino child: not when made, not for a disabled line, not for an enabled one; only a level of its own makes one, at its first enabled line', () => {
    const c = capture('info');
    const child = vi.spyOn(c.logger, 'child');
    const plain = new LazyChildLogger(c.logger, { a: 1 });
    plain.child({ b: 2 }).debug('hidden');
    plain.info('shown');
    expect(child).not.toHaveBeenCalled();
    const own = new LazyChildLogger(c.logger, { a: 2 }, { level: 'warn' });
    own.info('hidden');
    expect(child).not.toHaveBeenCalled();
    own.warn('shown');
    own.error('shown too');
    expect(child).toHaveBeenCalledTimes(1);
    expect(c.records().map((r) => [r.a, r.msg])).toEqual([
      [1, 'shown'],
      [2, 'shown'],
      [2, 'shown too'],
    ]);
  });

  it('honours the parent level and a level given to the child', () => {
    const c = capture('info');
    const plain = new LazyChildLogger(c.logger, { a: 1 });
    plain.debug('hidden');
    const quiet = new LazyChildLogger(c.logger, { a: 2 }, { level: 'warn' });
    quiet.info('hidden too');
    quiet.warn('shown');
    const loud = new LazyChildLogger(c.logger, { a: 3 }, { level: 'debug' });
    loud.debug('shown as well');
    expect(c.records().map((r) => r.msg)).toEqual(['shown', 'shown as well']);
    expect(quiet.level).toBe('warn');
    expect(plain.level).toBe('info');
    expect([plain.isLevelEnabled('info'), plain.isLevelEnabled('debug'), loud.isLevelEnabled('debug')]).toEqual([
      true,
      false,
      true,
    ]);
  });

  it("logs errors as err with their message, and keeps the parent's bindings in children", () => {
    const c = capture('info');
    const req = new LazyChildLogger(c.logger, { correlation_id: 'c2' });
    req.warn('materialise');
    req.child({ task_id: 't2' }).error('child line');
    expect(c.records()[1]).toMatchObject({ correlation_id: 'c2', task_id: 't2', level: 50 });
  });

  it('a child with a level more verbose than the root still logs at that level', () => {
    const c = capture('warn');
    const verbose = new LazyChildLogger(c.logger, { a: 1 }, { level: 'debug' });
    verbose.debug({ n: 2 }, 'shown');
    verbose.child({ b: 3 }).info('child shown');
    expect(c.records()).toEqual([
      expect.objectContaining({ a: 1, n: 2, msg: 'shown', level: 20 }),
      expect.objectContaining({ a: 1, b: 3, msg: 'child shown', level: 30 }),
    ]);
  });

  it('an Error as the first argument is logged as err', () => {
    const c = capture('info');
    new LazyChildLogger(c.logger, { a: 1 }).error(new Error('boom'));
    new LazyChildLogger(c.logger, { a: 2 }).error(new Error('boom'), 'own message');
    expect(c.records()).toEqual([
      expect.objectContaining({ a: 1, msg: 'boom', err: expect.objectContaining({ message: 'boom', type: 'Error' }) }),
      expect.objectContaining({ a: 2, msg: 'own message', err: expect.objectContaining({ message: 'boom' }) }),
    ]);
  });
});
