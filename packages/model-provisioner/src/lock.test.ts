import { readdir } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { acquireLock } from './lock.js';
import { TempDirs, testLogger } from './test-helpers.js';

const temp = new TempDirs();
afterAll(() => temp.cleanup());

describe('cache locks', () => {
  it('keeps several locks of one directory apart in one process', async () => {
    const dir = await temp.make();
    const logger = testLogger();
    const a = await acquireLock(dir, 'a', { logger });
    const b = await acquireLock(dir, 'b', { logger });
    expect((await readdir(dir)).sort()).toEqual(['a.lock', 'b.lock']);
    await a();
    await b();
    expect(await readdir(dir)).toEqual([]);
  });

  it('waits for the holder and stops waiting when the signal aborts', async () => {
    const dir = await temp.make();
    const logger = testLogger();
    const held = await acquireLock(dir, 'x', { logger });
    const waiting = acquireLock(dir, 'x', { logger, pollMs: 10 });
    const aborted = acquireLock(dir, 'x', { logger, signal: AbortSignal.timeout(100) });
    await expect(aborted).rejects.toThrow();
    setTimeout(() => void held(), 200);
    const release = await waiting;
    await release();
    expect(await readdir(dir)).toEqual([]);
  });
});
