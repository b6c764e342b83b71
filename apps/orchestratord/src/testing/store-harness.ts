// Test-only: opens shared stores of either kind (the reference model in memory, or Redis), as N replicas would.
import { randomUUID } from 'node:crypto';
import { systemClock } from '@llama-orch/daemon-support';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { ClusterStore, ClusterStoreSettingsInput, SharedStore } from '../store/cluster-store.js';
import { createClusterStore } from '../store/create-cluster-store.js';
import { createReferenceStore, type ReferenceStore } from './reference-store/reference-store.js';
import { REDIS_INSTALL_TIMEOUT_MS, startRedisServer, type RedisServerHandle } from './redis-server.js';

/**
 * What a store test runs against: `memory` — the reference model of the shared store
 * (testing/reference-store/) for the contract tests, or the product's in-process store where a
 * test builds an app (`storeOf`); `redis` — the Redis store on a redis-server of the test file.
 */
export const STORE_KINDS = ['memory', 'redis'] as const;
export type StoreKind = (typeof STORE_KINDS)[number];

/** The store's shared parts; throws for the in-process store (a test that needs them runs with a shared one). */
export function sharedStore(store: ClusterStore): SharedStore {
  if (!store.shared) throw new Error('not a shared store');
  return store;
}

export interface StoreHarness {
  /**
   * `n` clients of one fresh shared store (a new key prefix each call): with Redis, `n`
   * connections, as `n` replicas; the reference model, the one store `n` times.
   */
  open(n?: number, settings?: Partial<ClusterStoreSettingsInput>): Promise<SharedStore[]>;
  /** The redis-server of this file (redis kind only). */
  server(): RedisServerHandle;
  /**
   * The ids queued in `store` (one this harness opened), in dispatch order: interactive lane, then
   * batch, each in its order. Read past the store's interfaces (the product never lists the queue):
   * with Redis the lanes' sorted sets, in the reference model the queue's own lists.
   */
  queued(store: SharedStore): Promise<string[]>;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Registers the hooks of one `describe` block: a redis-server for the block when `kind` is redis, every store closed after each test. */
export function storeHarness(kind: StoreKind): StoreHarness {
  let server: RedisServerHandle | undefined;
  const opened: SharedStore[] = [];
  const prefixes = new WeakMap<SharedStore, string>();
  const references = new WeakMap<SharedStore, ReferenceStore>();
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
      const full: ClusterStoreSettingsInput = {
        redis_prefix: `t${randomUUID().slice(0, 8)}:`,
        ...settings,
        redis_url: kind === 'redis' ? server?.url : undefined,
      };
      if (kind === 'memory') {
        const one = createReferenceStore(full, { clock: systemClock });
        opened.push(one);
        references.set(one, one);
        return Array.from({ length: n }, () => one);
      }
      const stores = await Promise.all(
        Array.from({ length: n }, async () =>
          sharedStore(await createClusterStore(full, { clock: systemClock, logger })),
        ),
      );
      opened.push(...stores);
      for (const s of stores) prefixes.set(s, full.redis_prefix as string);
      return stores;
    },
    async queued(store) {
      const reference = references.get(store);
      if (reference !== undefined) return reference.queue.headsNow(Number.POSITIVE_INFINITY).map((e) => e.id);
      const prefix = prefixes.get(store);
      if (prefix === undefined) throw new Error('not a store of this harness');
      if (server === undefined) throw new Error('redis-server not started');
      raw ??= new Redis(server.url);
      const [interactive, batch] = await Promise.all([
        raw.zrange(`${prefix}q:lane:interactive`, '0', '-1'),
        raw.zrange(`${prefix}q:lane:batch`, '0', '-1'),
      ]);
      return [...interactive, ...batch];
    },
    server() {
      if (server === undefined) throw new Error('no redis-server in a memory block');
      return server;
    },
  };
}
