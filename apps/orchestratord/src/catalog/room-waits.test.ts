import { CatalogRegisterRequestSchema } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import type { CatalogModelEntry } from '../store/catalog-store.js';
import { captureLogger, ManualClock } from '../testing/test-helpers.js';
import { RoomWaits } from './room-waits.js';

const entry = (ref: string): CatalogModelEntry => {
  const r = CatalogRegisterRequestSchema.parse({ ref });
  return { id: ref, ref, aliases: r.aliases, policy: r, registeredAt: 0 };
};

describe('room waits: a model whose copy went here', () => {
  let waits: RoomWaits | undefined;
  afterEach(async () => {
    await waits?.close();
  });

  it('a task put back in line for a model whose copy went lately waits for it; an unknown model, or one gone long ago, does not', () => {
    const clock = new ManualClock(1_000_000);
    let queued: number | undefined;
    waits = new RoomWaits({
      catalog: { list: async () => [] },
      fleet: { pools: () => [], nodes: () => [] },
      loads: { load: async () => ({ kind: 'in_flight', pools: [] }), unloadCopy: async () => true },
      queuedUntil: () => queued,
      clock,
      logger: captureLogger().logger,
      retryMs: 60_000,
    });
    // evicted while nothing of it was queued: nothing waits yet
    waits.keepWaiting(entry('a'));
    expect(waits.waitingFor('a')).toBeUndefined();
    // a task placed on the going copy comes back to the line: it waits for the model
    queued = clock.now() + 30_000;
    expect(waits.waitsFor('a')).toBe(true);
    expect(waits.waitingFor('a')?.ref).toBe('a');
    expect(waits.waitsFor('never-here')).toBe(false);
    queued = undefined;
    waits.keepWaiting(entry('b'));
    clock.advance(61_000);
    expect(waits.waitsFor('b')).toBe(false);
  });
});
