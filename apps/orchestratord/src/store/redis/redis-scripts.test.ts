import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../errors.js';
import { loadScripts } from './lua-script.js';
import { RedisScripts, type ScriptRunner } from './redis-scripts.js';

/** A facade whose every script answers `reply`; records what it was asked. */
function answering(reply: unknown): { scripts: RedisScripts; calls: Array<{ name: string; keys: readonly string[]; args: readonly (string | number)[] }> } {
  const calls: Array<{ name: string; keys: readonly string[]; args: readonly (string | number)[] }> = [];
  const runner: ScriptRunner = {
    prefix: 'p:',
    eval: (script, keys, args) => {
      calls.push({ name: script.name, keys, args });
      return Promise.resolve(reply);
    },
  };
  return { scripts: new RedisScripts(runner, loadScripts()), calls };
}

describe('RedisScripts (the typed facade)', () => {
  it('builds the keys and arguments a script header states, and decodes its reply', async () => {
    const { scripts, calls } = answering(['fenced', 'replica-b', 7]);
    await expect(scripts.taskRenew('t1', 3, 5000)).resolves.toEqual({ ok: false, reason: 'fenced', owner: 'replica-b', fence: 7 });
    expect(calls).toEqual([{ name: 'task-renew', keys: ['p:task:t1', 'p:tasks:leases'], args: [3, 5000, 't1'] }]);

    const taken = answering(['taken', '{"lane":"batch","group":"m","payload":"x","deadline_at":"inf"}']);
    await expect(taken.scripts.queueTake('t2')).resolves.toEqual({
      kind: 'taken',
      entry: { id: 't2', lane: 'batch', group: 'm', payload: 'x', deadlineAt: Number.POSITIVE_INFINITY },
    });
    expect(taken.calls[0]?.keys).toEqual(['p:q:lane:interactive', 'p:q:lane:batch', 'p:q:entries', 'p:q:deadlines']);
  });

  it('turns a reply of another shape into a StoreUnavailableError naming the script', async () => {
    const cases: Array<[unknown, (s: RedisScripts) => Promise<unknown>, string]> = [
      [['taken'], (s) => s.queueTake('t'), 'queue-take'],
      [['what', 1], (s) => s.queueTake('t'), 'queue-take'],
      ['1', (s) => s.leaseHeld('pool'), 'lease-held'],
      [['a', 1, 'b'], (s) => s.queueGone(['a', 'b']), 'queue-gone'],
      [['ok', ['state', 'queued']], (s) => s.taskEnd('t', 1, 'done', 1000), 'task-end'],
      [[1.5, 10], (s) => s.rateLimitHit('k', 1000), 'rate-limit-hit'],
      [2, (s) => s.leaseRenew('pool', 'l', 1000), 'lease-renew'],
      ['gone', (s) => s.nodeHeartbeat('n', [], undefined, 1000), 'node-heartbeat'],
    ];
    for (const [reply, call, name] of cases) {
      const err: unknown = await call(answering(reply).scripts).catch((e: unknown) => e);
      expect(err, name).toBeInstanceOf(StoreUnavailableError);
      expect((err as Error).message).toContain(`script ${name} answered an unexpected reply`);
    }
  });
});
