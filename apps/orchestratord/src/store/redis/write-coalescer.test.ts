import { pino } from 'pino';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureRedisServer, REDIS_INSTALL_TIMEOUT_MS, startRedisServer } from '../../testing/redis-server.js';
import { RedisConnection } from './redis-client.js';

/** Reads redis-server processed (one per batch of bytes it read from a client socket). */
async function readsProcessed(c: RedisConnection): Promise<number> {
  const info = await c.call((r) => r.info('stats'), 'info');
  return Number(/total_reads_processed:(\d+)/.exec(info)?.[1]);
}

describe('write coalescing (RedisConnection)', () => {
  beforeAll(() => ensureRedisServer(), REDIS_INSTALL_TIMEOUT_MS);
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it('commands sent in one turn of the event loop reach redis-server in one write, each with its own answer', async () => {
    const server = await startRedisServer();
    cleanup.push(() => server.stop());
    const c = await RedisConnection.open({ url: server.url, prefix: 't:', logger: pino({ level: 'silent' }) });
    cleanup.push(() => c.close());
    const before = await readsProcessed(c);
    // 100 commands from 100 separate callers in one turn (as requests that arrived together).
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => c.call((r) => r.echo(`m${i}`), 'echo')));
    expect(answers).toEqual(Array.from({ length: 100 }, (_, i) => `m${i}`));
    // One write for the 100, one for each INFO; a write split by the kernel may cost a read more.
    expect((await readsProcessed(c)) - before).toBeLessThanOrEqual(4);
    // Commands of later turns are not held back: each turn's write leaves on its own.
    for (let i = 0; i < 3; i += 1) expect(await c.call((r) => r.echo(`later${i}`), 'echo')).toBe(`later${i}`);
  });
});
