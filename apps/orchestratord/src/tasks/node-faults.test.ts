import { describe, expect, it } from 'vitest';
import type { PoolView } from '../registry/pool-view.js';
import { AttemptAbort } from '../upstream/attempt-abort.js';
import { NodeLostError } from '../upstream/upstream-errors.js';
import { abandonSilentDispatches } from './node-faults.js';
import { acceptedQuiet, type TaskRecord } from './task-record.js';

/** A running attempt on node n1 / pool p1, accepted at `acceptedAt`, and what its node last said. */
function setup(acceptedAt: number) {
  const task = {
    state: 'running',
    tokens: 3,
    placement: { node_id: 'n1', pool_id: 'p1' },
    controller: new AttemptAbort(),
    quiet: undefined,
  } as unknown as TaskRecord;
  task.quiet = acceptedQuiet(task, acceptedAt);
  const node = { lastSeen: 0, free: 2 };
  const registry = {
    lastSeen: (id: string) => (id === 'n1' ? node.lastSeen : undefined),
    poolsWithId: (id: string) =>
      id === 'p1'
        ? [{ node_id: 'n1', snapshot: { slots_total: 2, slots_free: node.free } } as unknown as PoolView]
        : [],
  };
  /** A heartbeat sent at `sentAt` with `free` slots free, looked at `now`. */
  const beat = (sentAt: number, free: number, now = sentAt + 5): void => {
    node.lastSeen = sentAt;
    node.free = free;
    abandonSilentDispatches([task], registry, 'n1', now);
  };
  return { task, beat };
}

describe('abandonSilentDispatches (half-open dispatches)', () => {
  it('aborts an attempt with NodeLostError after two heartbeats sent after its last progress report its pool idle', () => {
    const { task, beat } = setup(1000);
    beat(1500, 2);
    expect(task.controller?.aborted).toBe(false);
    beat(2000, 2);
    expect(task.controller?.aborted).toBe(true);
    expect(task.controller?.reason).toBeInstanceOf(NodeLostError);
  });

  it('counts nothing while the pool has a busy slot, and starts again from a busy beat', () => {
    const { task, beat } = setup(1000);
    beat(1500, 2);
    beat(2000, 1);
    beat(2500, 2);
    expect(task.controller?.aborted).toBe(false);
    beat(3000, 2);
    expect(task.controller?.aborted).toBe(true);
  });

  it('a token since the last look is progress: the silence starts over from that look', () => {
    const { task, beat } = setup(1000);
    beat(1500, 2);
    task.tokens += 1;
    beat(2000, 2, 2005);
    // sent before the look that saw the token: not evidence
    beat(2004, 2, 2100);
    expect(task.controller?.aborted).toBe(false);
    beat(2500, 2);
    expect(task.controller?.aborted).toBe(false);
    beat(3000, 2);
    expect(task.controller?.aborted).toBe(true);
  });

  it('ignores heartbeats sent before the attempt was accepted and the same heartbeat read twice', () => {
    const { task, beat } = setup(1000);
    beat(900, 2);
    beat(999, 2);
    beat(1500, 2);
    beat(1500, 2, 1600);
    expect(task.controller?.aborted).toBe(false);
  });

  it('leaves attempts not yet accepted and attempts on other nodes alone', () => {
    const { task, beat } = setup(1000);
    task.quiet = undefined;
    beat(1500, 2);
    beat(2000, 2);
    expect(task.controller?.aborted).toBe(false);
    task.quiet = acceptedQuiet(task, 1000);
    (task.placement as { node_id: string }).node_id = 'n2';
    beat(2500, 2);
    beat(3000, 2);
    expect(task.controller?.aborted).toBe(false);
  });
});
