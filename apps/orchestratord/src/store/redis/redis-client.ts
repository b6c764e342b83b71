import type { Socket } from 'node:net';
import type { Log } from '@llama-orch/daemon-support';
import type { Redis as RedisClient } from 'ioredis';
import { StoreUnavailableError } from '../../errors.js';
import type { LuaScript } from './lua-script.js';
import { redactedUrl } from '../redacted-url.js';
import { WriteCoalescer } from './write-coalescer.js';

export interface RedisConnectionOptions {
  url: string;
  /** Prefix of every key. */
  prefix: string;
  /** A command not answered in this time fails with StoreUnavailableError, ms. @default 2000 */
  commandTimeoutMs?: number;
  /** How long the first connection may take, ms. @default 5000 */
  connectTimeoutMs?: number;
  logger: Log;
}

export type RedisConnectionState = 'open' | 'closing' | 'closed';

/**
 * One ioredis connection shared by the store's parts. Commands never wait for a connection that is
 * down: the offline queue is off and each command has a timeout, so a lost Redis surfaces as a
 * {@link StoreUnavailableError} at once while ioredis reconnects in the background.
 */
export class RedisConnection {
  readonly prefix: string;
  readonly #client: RedisClient;
  readonly #logger: Log;
  readonly #where: string;
  #state: RedisConnectionState = 'open';
  #closing: Promise<void> | undefined;
  readonly #writes = new WriteCoalescer();

  private constructor(client: RedisClient, prefix: string, logger: Log, where: string) {
    this.#client = client;
    this.prefix = prefix;
    this.#logger = logger;
    this.#where = where;
  }

  /** Connects (ioredis is loaded here, only when a Redis store is configured) and checks the server answers. */
  static async open(options: RedisConnectionOptions): Promise<RedisConnection> {
    const { Redis } = await import('ioredis');
    const where = redactedUrl(options.url);
    const client = new Redis(options.url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs ?? 2000,
      connectTimeout: options.connectTimeoutMs ?? 5000,
      // No auto-pipelining: with the offline queue off, commands auto-pipelined while the connection
      // is down may never settle (redis/ioredis#1511), and every call here must reject at once.
      // Reconnect for ever, at most once a second: replicas outlive a Redis restart.
      retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 5), 1000),
    });
    let lastError: string | undefined;
    client.on('error', (err: Error) => {
      // ioredis emits every failed reconnect; log a changed reason once.
      if (err.message === lastError) return;
      lastError = err.message;
      options.logger.warn({ err, redis: where }, 'cluster store connection error');
    });
    client.on('ready', () => {
      if (lastError !== undefined) options.logger.info({ redis: where }, 'cluster store connection restored');
      lastError = undefined;
    });
    try {
      await client.connect();
      await client.ping();
    } catch (err) {
      client.disconnect();
      throw new StoreUnavailableError(`cannot reach the cluster store at ${where}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    return new RedisConnection(client, options.prefix, options.logger, where);
  }

  get state(): RedisConnectionState {
    return this.#state;
  }

  get client(): RedisClient {
    return this.#client;
  }

  /** Runs a script (EVALSHA, EVAL when the server does not know it). Every failure is a StoreUnavailableError. */
  async eval(script: LuaScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    return this.call(async (c) => {
      try {
        return await c.evalsha(script.sha, keys.length, ...keys, ...args);
      } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
        return await c.eval(script.source, keys.length, ...keys, ...args);
      }
    }, script.name);
  }

  /** Runs commands, turning any failure into a StoreUnavailableError that names the operation. */
  async call<T>(op: (client: RedisClient) => Promise<T>, what: string): Promise<T> {
    if (this.#state !== 'open') throw new StoreUnavailableError(`cluster store connection is ${this.#state} (${what})`);
    this.#writes.hold(this.#client.stream as Socket | undefined);
    try {
      return await op(this.#client);
    } catch (err) {
      throw new StoreUnavailableError(`cluster store ${what} failed at ${this.#where}: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  /** PING round trip, ms. */
  async ping(): Promise<number> {
    const started = performance.now();
    await this.call((c) => c.ping(), 'ping');
    return performance.now() - started;
  }

  /** QUIT within `timeoutMs`, else drops the socket. Idempotent. */
  close(timeoutMs = 1000): Promise<void> {
    this.#closing ??= (async () => {
      this.#state = 'closing';
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
        timer.unref();
      });
      await Promise.race([
        this.#client.quit().then(
          () => undefined,
          () => undefined,
        ),
        late,
      ]);
      clearTimeout(timer);
      this.#client.disconnect();
      this.#state = 'closed';
      this.#logger.debug({ redis: this.#where }, 'cluster store connection closed');
    })();
    return this.#closing;
  }
}
