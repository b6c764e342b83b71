import { systemClock } from '@llama-orch/daemon-support';
import { pino } from 'pino';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../errors.js';
import {
  ensureRedisServer,
  REDIS_INSTALL_TIMEOUT_MS,
  startRedisServer,
  type RedisServerHandle,
} from '../testing/redis-server.js';
import { sharedStore, sleep } from '../testing/store-harness.js';
import type { SharedStore } from './cluster-store.js';
import { createClusterStore } from './create-cluster-store.js';
import type { TaskAdmit } from './task-lifecycle-store.js';

const deps = { clock: systemClock, logger: pino({ level: 'silent' }) };

/** A task's admission (record, entry, session turn) with this id. */
const admission = (id: string): TaskAdmit => ({
  task: { id, owner: 'A', record: '{}', ttlMs: 60_000, lifetimeMs: 60_000 },
  entry: { lane: 'batch', group: 'm', payload: 'A' },
  sessionId: `s-${id}`,
});

/** Resolves with how the promise settled and how long it took: a store call must never hang. */
async function settle<T>(p: Promise<T>): Promise<{ ms: number; value?: T; error?: unknown }> {
  const started = performance.now();
  try {
    const value = await p;
    return { ms: performance.now() - started, value };
  } catch (error) {
    return { ms: performance.now() - started, error };
  }
}

describe('redis store faults', () => {
  // Each test starts its own server; the install (when missing) happens once, here.
  beforeAll(() => ensureRedisServer(), REDIS_INSTALL_TIMEOUT_MS);
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });
  async function open(server: RedisServerHandle, settings = {}): Promise<SharedStore> {
    const store = sharedStore(
      await createClusterStore(
        { redis_url: server.url, redis_prefix: 'faults:', command_timeout_ms: 500, ...settings },
        deps,
      ),
    );
    cleanup.push(() => store.close());
    return store;
  }

  it('a Redis nobody listens on fails start-up with StoreUnavailableError, quickly', async () => {
    const server = await startRedisServer();
    await server.stop();
    const r = await settle(createClusterStore({ redis_url: server.url }, deps));
    expect(r.error).toBeInstanceOf(StoreUnavailableError);
    expect((r.error as Error).message).toContain(`127.0.0.1:${server.port}`);
    expect(r.ms).toBeLessThan(6000);
  });

  it('Redis down → typed errors at once, not hangs; restarted empty → the same calls answer again, from an empty state', async () => {
    const server = await startRedisServer();
    cleanup.push(() => server.stop());
    const store = await open(server);
    expect(await store.lifecycle.admit(admission('t1'))).toMatchObject({ kind: 'queued', position: 0 });
    expect((await store.leases.acquire({ poolKey: 'n/p', slots: 1, leaseId: 't1', ttlMs: 60_000 })).kind).toBe(
      'granted',
    );
    expect(await store.health()).toMatchObject({ ok: true, kind: 'redis' });

    await server.kill();
    const calls: Array<() => Promise<unknown>> = [
      () => store.leases.acquire({ poolKey: 'n/p', slots: 1, leaseId: 't2', ttlMs: 1000 }),
      () => store.lifecycle.admit(admission('q')),
      () => store.lifecycle.dispatch('t1', 1, 'n/p'),
      () => store.nodes.sweep(),
      () => store.rateLimits.hit('k', 1, 1000),
    ];
    for (const call of calls) {
      const r = await settle(call());
      expect(r.error).toBeInstanceOf(StoreUnavailableError);
      expect((r.error as StoreUnavailableError).retriable).toBe(true);
      expect(r.ms).toBeLessThan(1500);
    }
    expect(await store.health()).toMatchObject({ ok: false, kind: 'redis' });

    await server.restart();
    // ioredis reconnects on its own (at most a second apart); the script cache is empty (EVALSHA → NOSCRIPT → EVAL)
    let health = await store.health();
    for (let i = 0; i < 50 && !health.ok; i += 1) {
      await sleep(100);
      health = await store.health();
    }
    expect(health.ok).toBe(true);
    expect(await store.lifecycle.dispatch('t1', 1, 'n/p')).toEqual({ kind: 'absent' });
    expect(await store.tasks.get('t1')).toBeUndefined();
    expect(await store.leases.list('n/p')).toEqual([]);
    expect(await store.lifecycle.admit(admission('q'))).toMatchObject({ kind: 'queued', position: 0, fence: 1 });
  });

  it('close is bounded and idempotent, also while Redis is gone; calls after close fail typed', async () => {
    const server = await startRedisServer();
    cleanup.push(() => server.stop());
    const store = await open(server);
    await server.kill();
    const first = store.close();
    expect(store.close()).toBe(first);
    const r = await settle(first);
    expect(r.error).toBeUndefined();
    expect(r.ms).toBeLessThan(1500);
    expect((await settle(store.queue.sizes())).error).toBeInstanceOf(StoreUnavailableError);
  });

  it('two clusters with different prefixes share one Redis without seeing each other', async () => {
    const server = await startRedisServer();
    cleanup.push(() => server.stop());
    const one = await open(server, { redis_prefix: 'one:' });
    const two = await open(server, { redis_prefix: 'two:' });
    await one.lifecycle.admit(admission('x'));
    expect(await two.queue.sizes()).toEqual({ interactive: 0, batch: 0 });
    expect(await two.lifecycle.admit(admission('x'))).toMatchObject({ kind: 'queued', position: 0 });
  });
});
