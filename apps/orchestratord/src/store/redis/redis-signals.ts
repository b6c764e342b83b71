import type { Log } from '@llama-orch/daemon-support';
import type { Redis as RedisClient } from 'ioredis';
import { parseSignal, type ClusterSignalListener, type ClusterSignals } from '../cluster-signals.js';
import type { RedisConnection } from './redis-client.js';
import { signalsChannel } from './redis-keys.js';

/**
 * Signals through Redis pub/sub on a second connection (a subscribed connection runs no other
 * command), opened with the first listener. ioredis resubscribes after a reconnect; what was
 * published meanwhile is lost, which a signal may be (cluster-signals.ts).
 */
export class RedisSignals implements ClusterSignals {
  readonly #redis: RedisConnection;
  readonly #logger: Log;
  readonly #listeners = new Set<ClusterSignalListener>();
  #subscriber: RedisClient | undefined;
  #closed = false;

  constructor(redis: RedisConnection, logger: Log) {
    this.#redis = redis;
    this.#logger = logger;
  }

  subscribe(listener: ClusterSignalListener): () => void {
    this.#listeners.add(listener);
    if (this.#subscriber === undefined && !this.#closed) this.#open();
    return () => this.#listeners.delete(listener);
  }

  #open(): void {
    const sub = this.#redis.client.duplicate({ enableOfflineQueue: true, commandTimeout: undefined });
    this.#subscriber = sub;
    sub.on('error', () => {
      // The command connection logs the outage; this one follows it.
    });
    sub.on('message', (_channel: string, message: string) => {
      const signal = parseSignal(message);
      if (signal === undefined) return;
      for (const l of this.#listeners) l(signal);
    });
    sub.subscribe(signalsChannel(this.#redis.prefix)).catch((err: unknown) => {
      if (!this.#closed)
        this.#logger.warn({ err }, 'cluster signals: subscribe failed (dispatch waits for heartbeats until it works)');
    });
  }

  /** Bounded: QUIT, else the socket is dropped. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#listeners.clear();
    const sub = this.#subscriber;
    if (sub === undefined) return;
    this.#subscriber = undefined;
    const quit = sub.quit().catch(() => undefined);
    const timer = new Promise<void>((resolve) => setTimeout(resolve, 1000).unref());
    await Promise.race([quit, timer]);
    sub.disconnect();
  }
}
