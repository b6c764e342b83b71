import type { Log } from '@llama-orch/daemon-support';
import type { Redis as RedisClient } from 'ioredis';
import type { RedisConnection } from './redis-client.js';

/**
 * One pub/sub channel's messages, parsed, on a connection of its own (a subscribed connection runs
 * no other command), opened with the first listener. ioredis resubscribes after a reconnect; what was
 * published meanwhile is lost, which every message on these channels may be (they are hints).
 */
export class RedisChannel<T> {
  readonly #redis: RedisConnection;
  readonly #logger: Log;
  readonly #channel: string;
  readonly #parse: (message: string) => T | undefined;
  /** What the channel carries, for the log line of a failed subscribe. */
  readonly #what: string;
  readonly #listeners = new Set<(message: T) => void>();
  #subscriber: RedisClient | undefined;
  #closed = false;

  constructor(
    redis: RedisConnection,
    logger: Log,
    channel: string,
    parse: (message: string) => T | undefined,
    what: string,
  ) {
    this.#redis = redis;
    this.#logger = logger;
    this.#channel = channel;
    this.#parse = parse;
    this.#what = what;
  }

  subscribe(listener: (message: T) => void): () => void {
    this.#listeners.add(listener);
    if (this.#subscriber === undefined && !this.#closed) this.#open();
    return () => this.#listeners.delete(listener);
  }

  /** Fire and forget: a message that cannot be sent is dropped (a hint). */
  publish(message: string): void {
    if (this.#closed) return;
    this.#redis.client.publish(this.#channel, message).catch(() => {
      // The command connection logs the outage.
    });
  }

  #open(): void {
    const sub = this.#redis.client.duplicate({ enableOfflineQueue: true, commandTimeout: undefined });
    this.#subscriber = sub;
    sub.on('error', () => {
      // The command connection logs the outage; this one follows it.
    });
    sub.on('message', (_channel: string, message: string) => {
      const parsed = this.#parse(message);
      if (parsed === undefined) return;
      for (const l of this.#listeners) l(parsed);
    });
    sub.subscribe(this.#channel).catch((err: unknown) => {
      if (!this.#closed) this.#logger.warn({ err }, `${this.#what}: subscribe failed (retried on reconnect)`);
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
