import type { Clock, Log } from '@llama-orch/daemon-support';
import type { ReplicaInfo, ReplicaMembershipStore } from '../store/replica-membership-store.js';
import type { ReplicaDirectory } from './replica-directory.js';
import type { ReplicaIdentity } from './replica-identity.js';

export interface ReplicaMembershipOptions {
  store: ReplicaMembershipStore;
  identity: ReplicaIdentity;
  /** Refreshed with the live list after each announcement. */
  directory: ReplicaDirectory;
  /** orchestratord's version. */
  version: string;
  /** This replica's figures at announcement time. */
  figures: () => { tasksRelayed: number; load: number };
  /** Announcement period, ms; the store keeps an announcement 3 periods (two may be missed). */
  intervalMs: number;
  clock: Clock;
  logger: Log;
  /** Longest `close()` waits for the store's `leave`, ms. @default 1000 */
  leaveTimeoutMs?: number;
}

/**
 * `idle` → `running` (start(): first announcement, then one per interval) → `closing` (close():
 * the timer stops, an announcement in flight is awaited so it cannot re-add the replica, then
 * `leave`, bounded) → `closed`. An announcement that fails (store down) is logged once per outage
 * (warn, then info when one succeeds again) and never throws: membership is for the dashboard and
 * the metrics leader, and must not take the replica down with the store.
 */
export type ReplicaMembershipState = 'idle' | 'running' | 'closing' | 'closed';

/** Announces this replica to the cluster store every interval and leaves it on close. */
export class ReplicaMembership {
  readonly upSince: number;
  readonly #o: ReplicaMembershipOptions;
  #state: ReplicaMembershipState = 'idle';
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | undefined;
  #closing: Promise<void> | undefined;
  /** The failure being reported, so an outage is logged once. */
  #outage: string | undefined;

  constructor(o: ReplicaMembershipOptions) {
    this.#o = o;
    this.upSince = Math.round(o.clock.now());
  }

  get state(): ReplicaMembershipState {
    return this.#state;
  }

  /** TTL of one announcement, ms. */
  get ttlMs(): number {
    return 3 * this.#o.intervalMs;
  }

  /** What this replica announces now. */
  info(): ReplicaInfo {
    const f = this.#o.figures();
    return {
      replica_id: this.#o.identity.replicaId,
      address: this.#o.identity.address() ?? this.#o.identity.configuredAddress,
      version: this.#o.version,
      up_since: this.upSince,
      tasks_relayed: f.tasksRelayed,
      load: f.load,
    };
  }

  /** Announces once (awaited, never rejects), then every interval. */
  async start(): Promise<void> {
    if (this.#state !== 'idle') return;
    this.#state = 'running';
    await this.announceNow();
    this.#arm();
  }

  /** Announces now (e.g. once listening, with the bound address); joins an announcement in flight. Never rejects. */
  announceNow(): Promise<void> {
    if (this.#state !== 'running') return Promise.resolve();
    this.#inFlight ??= this.#announce().finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  /** Idempotent (the same promise); bounded by `leaveTimeoutMs` plus an announcement's command timeout. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const wasRunning = this.#state === 'running';
      this.#state = 'closing';
      clearTimeout(this.#timer);
      this.#timer = undefined;
      await this.#inFlight;
      if (wasRunning) await this.#leave();
      this.#state = 'closed';
    })();
    return this.#closing;
  }

  async #announce(): Promise<void> {
    const { store, directory, logger } = this.#o;
    try {
      await store.announce(this.info(), this.ttlMs);
      directory.update(await store.list());
      if (this.#outage !== undefined)
        logger.info({ replica_id: this.#o.identity.replicaId }, 'replica announcements restored');
      this.#outage = undefined;
    } catch (err) {
      const reason = (err as Error).message;
      if (this.#outage === undefined)
        logger.warn(
          { err, replica_id: this.#o.identity.replicaId },
          'replica announcement failed; retrying every interval',
        );
      this.#outage = reason;
    }
  }

  async #leave(): Promise<void> {
    const timeoutMs = this.#o.leaveTimeoutMs ?? 1000;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), timeoutMs);
      timer.unref();
    });
    try {
      const r = await Promise.race([this.#o.store.leave(this.#o.identity.replicaId).then(() => 'left' as const), late]);
      if (r === 'late')
        this.#o.logger.warn(
          { replica_id: this.#o.identity.replicaId, timeout_ms: timeoutMs },
          'replica leave timed out; the others drop it after its ttl',
        );
    } catch (err) {
      this.#o.logger.warn(
        { err, replica_id: this.#o.identity.replicaId },
        'replica leave failed; the others drop it after its ttl',
      );
    } finally {
      clearTimeout(timer);
    }
  }

  #arm(): void {
    if (this.#state !== 'running') return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.announceNow().then(() => this.#arm());
    }, this.#o.intervalMs);
    this.#timer.unref();
  }
}
