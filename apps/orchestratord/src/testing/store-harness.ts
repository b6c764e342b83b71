// Test-only: opens cluster stores of either kind, as N replicas would.
import { randomUUID } from 'node:crypto';
import { systemClock } from '@llama-orch/daemon-support';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { ClusterStore, ClusterStoreSettingsInput } from '../store/cluster-store.js';
import { createClusterStore } from '../store/create-cluster-store.js';
import type { MemoryQueue } from '../store/memory/memory-queue.js';
import { REDIS_INSTALL_TIMEOUT_MS, startRedisServer, type RedisServerHandle } from './redis-server.js';

export const STORE_KINDS = ['memory', 'redis'] as const;
export type StoreKind = (typeof STORE_KINDS)[number];

export interface StoreHarness {
  /**
   * `n` clients of one fresh store (a new key prefix each call): with Redis, `n` connections, as
   * `n` replicas; in-process, the one store `n` times (a single process is its only client).
   */
  open(n?: number, settings?: Partial<ClusterStoreSettingsInput>): Promise<ClusterStore[]>;
  /** The redis-server of this file (redis kind only). */
  server(): RedisServerHandle;
  /**
   * The ids queued in `store` (one this harness opened), in dispatch order: interactive lane, then
   * batch, each in its order. Read past the store's interfaces (the product never lists the queue):
   * with Redis the lanes' sorted sets, in-process the queue's own lists.
   */
  queued(store: ClusterStore): Promise<string[]>;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Registers the hooks of one `describe` block: a redis-server for the block when `kind` is redis, every store closed after each test. */
export function storeHarness(kind: StoreKind): StoreHarness {
  let server: RedisServerHandle | undefined;
  const opened: ClusterStore[] = [];
  const prefixes = new WeakMap<ClusterStore, string>();
  let raw: Redis | undefined;
  const logger = pino({ level: 'silent' });
  beforeAll(async () => {
    if (kind === 'redis') server = await startRedisServer();
  }, REDIS_INSTALL_TIMEOUT_MS);
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((s) => s.close()));
  });
  afterAll(async () => {
    await raw?.quit();
    await server?.stop();
  });
  return {
    async open(n = 1, settings = {}) {
      const full: ClusterStoreSettingsInput = { redis_prefix: `t${randomUUID().slice(0, 8)}:`, ...settings, redis_url: kind === 'redis' ? server?.url : undefined };
      if (kind === 'memory') {
        const one = await createClusterStore(full, { clock: systemClock, logger });
        opened.push(one);
        return Array.from({ length: n }, () => one);
      }
      const stores = await Promise.all(Array.from({ length: n }, () => createClusterStore(full, { clock: systemClock, logger })));
      opened.push(...stores);
      for (const s of stores) prefixes.set(s, full.redis_prefix as string);
      return stores;
    },
    async queued(store) {
      if (kind === 'memory') return (store.queue as MemoryQueue).headsNow(Number.POSITIVE_INFINITY).map((e) => e.id);
      const prefix = prefixes.get(store);
      if (prefix === undefined) throw new Error('not a store of this harness');
      if (server === undefined) throw new Error('redis-server not started');
      raw ??= new Redis(server.url);
      const [interactive, batch] = await Promise.all([raw.zrange(`${prefix}q:lane:interactive`, '0', '-1'), raw.zrange(`${prefix}q:lane:batch`, '0', '-1')]);
      return [...interactive, ...batch];
    },
    server() {
      if (server === undefined) throw new Error('no redis-server in a memory block');
      return server;
    },
  };
}
