import { describe, expect, it } from 'vitest';
import { parseSignal, type ClusterSignal } from './cluster-signals.js';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';
import type { QueueLane } from './admission-queue-store.js';
import type { TaskAdmit } from './task-lifecycle-store.js';

/** Task `id` of replica `owner`, admitted for model `m` (its entry's payload names the owner). */
const admission = (id: string, lane: QueueLane, owner: string): TaskAdmit => ({
  task: { id, owner, record: '{}', ttlMs: 10_000, lifetimeMs: 60_000 },
  entry: { lane, group: 'm', payload: owner },
  sessionId: `s-${id}`,
});

/** Waits until `pred` holds of what was received (Redis delivers through a second connection). */
async function until(received: ClusterSignal[], pred: (s: ClusterSignal[]) => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!pred(received) && Date.now() < end) await sleep(10);
  expect(pred(received), JSON.stringify(received)).toBe(true);
}

describe.each(STORE_KINDS)('cluster signals (%s store)', (kind) => {
  const h = storeHarness(kind);

  it("every replica hears lease changes (held slots) and changes of a model's first queued entry while other entries of the model wait, from any replica", async () => {
    const [a, b] = await h.open(2);
    const heard: ClusterSignal[] = [];
    b!.signals.subscribe((s) => heard.push(s));
    // the subscription is live once a probe signal comes back
    for (let i = 0; heard.length === 0 && i < 100; i += 1) {
      await a!.leases.acquire({ poolKey: 'probe', slots: 1, leaseId: `p${i}`, ttlMs: 10_000 });
      await a!.leases.release('probe', `p${i}`);
      await sleep(20);
    }
    heard.length = 0;
    await a!.leases.acquire({ poolKey: 'n1/p1', slots: 2, leaseId: 'x', ttlMs: 10_000 });
    await a!.leases.acquire({ poolKey: 'n1/p1', slots: 2, leaseId: 'x', ttlMs: 10_000 }); // a renewal: no signal
    await a!.leases.acquire({ poolKey: 'n1/p1', slots: 2, leaseId: 'y', ttlMs: 10_000 });
    await a!.leases.acquire({ poolKey: 'n1/p1', slots: 2, leaseId: 'z', ttlMs: 10_000 }); // full: no signal
    await a!.leases.release('n1/p1', 'x');
    await a!.leases.release('n1/p1', 'x'); // not held: no signal
    await a!.lifecycle.admit(admission('t1', 'batch', 'A')); // first of an empty model: no signal
    await b!.lifecycle.admit(admission('t3', 'batch', 'B')); // behind the first: no signal
    await b!.lifecycle.admit(admission('t2', 'interactive', 'B'));
    await b!.lifecycle.dispatch('t2', 1, 'n1/p1');
    await a!.queue.remove('t3'); // not the first: no signal
    await a!.lifecycle.dispatch('t1', 1, 'n1/p1'); // the last: the model's queue is empty, no signal
    await a!.lifecycle.admit(admission('t4', 'batch', 'A')); // first of an empty model again: no signal
    await b!.lifecycle.admit(admission('t5', 'batch', 'B'));
    await a!.queue.remove('t4');
    await until(heard, (s) => s.length >= 6);
    await sleep(50);
    expect(heard).toEqual([
      { kind: 'lease', poolKey: 'n1/p1', held: 1, leaseId: 'x', delta: 1 },
      { kind: 'lease', poolKey: 'n1/p1', held: 2, leaseId: 'y', delta: 1 },
      { kind: 'lease', poolKey: 'n1/p1', held: 1, leaseId: 'x', delta: -1 },
      // each change of the model's first entry while others wait names it, and its payload (the task service's owner)
      { kind: 'queue', group: 'm', head: 't2', headPayload: 'B' },
      { kind: 'queue', group: 'm', head: 't1', headPayload: 'A' },
      { kind: 'queue', group: 'm', head: 't5', headPayload: 'B' },
    ]);
  });
});

describe('parseSignal', () => {
  it('reads the two message kinds and nothing else', () => {
    expect(parseSignal('lease\tn/p\t3\tt1#ab.1\t+')).toEqual({
      kind: 'lease',
      poolKey: 'n/p',
      held: 3,
      leaseId: 't1#ab.1',
      delta: 1,
    });
    expect(parseSignal('lease\tn/p\t2\tt1#ab.1\t-')).toEqual({
      kind: 'lease',
      poolKey: 'n/p',
      held: 2,
      leaseId: 't1#ab.1',
      delta: -1,
    });
    expect(parseSignal('queue\tqwen\tt9\tr2')).toEqual({ kind: 'queue', group: 'qwen', head: 't9', headPayload: 'r2' });
    expect(parseSignal('queue\tqwen\t\t')).toEqual({
      kind: 'queue',
      group: 'qwen',
      head: undefined,
      headPayload: undefined,
    });
    expect(parseSignal('queue\tqwen')).toBeUndefined();
    expect(parseSignal('lease\tn/p\tx\ty\t+')).toBeUndefined();
    expect(parseSignal('lease\tn/p\t3')).toBeUndefined();
    expect(parseSignal('other\ta')).toBeUndefined();
  });
});
