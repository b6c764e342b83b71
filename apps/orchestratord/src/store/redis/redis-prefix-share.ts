import type { Log } from '@llama-orch/daemon-support';
import {
  formatPrefixNews,
  parsePrefixNews,
  type PrefixNews,
  type PrefixNewsListener,
  type PrefixShare,
} from '../prefix-share.js';
import { RedisChannel } from './redis-channel.js';
import type { RedisConnection } from './redis-client.js';
import { prefixChannel } from './redis-keys.js';

/** Prefix news through Redis pub/sub: one PUBLISH per placement, heard by every replica within a round trip. */
export class RedisPrefixShare implements PrefixShare {
  readonly #channel: RedisChannel<PrefixNews>;

  constructor(redis: RedisConnection, logger: Log) {
    this.#channel = new RedisChannel(
      redis,
      logger,
      prefixChannel(redis.prefix),
      parsePrefixNews,
      'prefix index news (this replica learns only from its own placements until it works)',
    );
  }

  publish(news: PrefixNews): void {
    this.#channel.publish(formatPrefixNews(news));
  }

  subscribe(listener: PrefixNewsListener): () => void {
    return this.#channel.subscribe(listener);
  }

  close(): Promise<void> {
    return this.#channel.close();
  }
}
