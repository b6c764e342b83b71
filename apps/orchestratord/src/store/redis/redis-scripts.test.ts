import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../errors.js';
import { loadScripts } from './lua-script.js';
import { RedisScripts, type ScriptRunner } from './redis-scripts.js';

/** A facade whose every script answers `reply`; records what it was asked. */
function answering(reply: unknown): {
  scripts: RedisScripts;
  calls: Array<{ name: string; keys: readonly string[]; args: readonly (string | number)[] }>;
} {
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
    await expect(scripts.taskSeize('t1', { owner: 'replica-a', fence: 3 }, 'r9', 5000, undefined)).resolves.toEqual({
      ok: false,
      reason: 'fenced',
      owner: 'replica-b',
      fence: 7,
    });
    expect(calls).toEqual([
      { name: 'task-seize', keys: ['p:task:t1', 'p:tasks:leases'], args: ['replica-a', 3, 'r9', 5000, 't1', ''] },
    ]);

    const hash = [
      'state',
      'running',
      'owner',
      'a',
      'owner_until',
      '9',
      'fence',
      '1',
      'attempt',
      '1',
      'record',
      '{}',
      'placement',
      'n/p',
    ];
    const taken = answering(['taken', '{"lane":"batch","group":"m","payload":"x","deadline_at":"inf"}', hash]);
    await expect(taken.scripts.taskTakeDispatch('t2', 1, 'n/p', undefined)).resolves.toEqual({
      kind: 'taken',
      entry: { id: 't2', lane: 'batch', group: 'm', payload: 'x', deadlineAt: Number.POSITIVE_INFINITY },
      task: {
        id: 't2',
        state: 'running',
        owner: 'a',
        ownerUntil: 9,
        fence: 1,
        attempt: 1,
        record: '{}',
        placement: 'n/p',
        outcome: undefined,
      },
    });
    expect(taken.calls[0]?.keys).toEqual([
      'p:q:lane:interactive',
      'p:q:lane:batch',
      'p:q:entries',
      'p:task:t2',
      'p:task:t2',
    ]);
  });

  it('turns a reply of another shape into a StoreUnavailableError naming the script', async () => {
    const finish = { id: 't', fence: 1, outcome: 'done', retainMs: 1000, dequeue: true };
    const limits = { ttlMs: 1000, capMs: 2000, tokenBudget: undefined };
    const cases: Array<[unknown, (s: RedisScripts) => Promise<unknown>, string]> = [
      [['taken'], (s) => s.taskTakeDispatch('t', 1, 'n/p', undefined), 'task-take-dispatch'],
      [['what', 1], (s) => s.taskTakeDispatch('t', 1, 'n/p', undefined), 'task-take-dispatch'],
      ['1', (s) => s.leaseList('pool'), 'lease-list'],
      [['a', 1, 'b'], (s) => s.queueGone(['a', 'b']), 'queue-gone'],
      [['ok', ['state', 'queued'], 0], (s) => s.taskFinish(finish, limits), 'task-finish'],
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
