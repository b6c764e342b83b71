import type { Log } from '@llama-orch/daemon-support';
import {
  parseSignal,
  type ClusterSignal,
  type ClusterSignalListener,
  type ClusterSignals,
} from '../cluster-signals.js';
import { RedisChannel } from './redis-channel.js';
import type { RedisConnection } from './redis-client.js';
import { signalsChannel } from './redis-keys.js';

/** Signals through Redis pub/sub (the lease and queue scripts publish them); a lost one only delays a dispatch until the next heartbeat or tick. */
export class RedisSignals implements ClusterSignals {
  readonly #channel: RedisChannel<ClusterSignal>;

  constructor(redis: RedisConnection, logger: Log) {
    this.#channel = new RedisChannel(
      redis,
      logger,
      signalsChannel(redis.prefix),
      parseSignal,
      'cluster signals (dispatch waits for heartbeats until it works)',
    );
  }

  subscribe(listener: ClusterSignalListener): () => void {
    return this.#channel.subscribe(listener);
  }

  close(): Promise<void> {
    return this.#channel.close();
  }
}
