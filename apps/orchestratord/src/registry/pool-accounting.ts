import type { NodeState, PoolSnapshot } from '@llama-orch/contracts';
import type { DispatchTarget } from '../upstream/pool-client.js';
import { candidateKey, type PoolView } from './pool-view.js';

/**
 * Lease accounting per pool (slots orchestratord has handed out and not yet got back):
 *   foreign_busy   = max(0, (slots_total − hb.slots_free) − leases_at_last_heartbeat)
 *   effective_free = clamp(slots_total − leases_now − foreign_busy, 0, slots_total)
 * With a Redis store, foreign_busy is instead the slots other replicas lease (`foreignLeases`).
 * Busy slots in a heartbeat are assumed to be ours up to the number of leases we held when the
 * node sent it: those held when it arrived plus those released since it was sent (and in the
 * {@link RELEASE_LAG_MS} before: the node frees its slot a moment after it sent the end event we
 * release on). So they are never counted twice, a lease released after that heartbeat frees its
 * slot at once (no stall until the next heartbeat) — also when the heartbeat was in flight while
 * the lease ended, which otherwise kept a just-freed pool "busy" until the next one and sent a
 * conversation's next turn away from the pool holding its prompt cache; slots busy for other
 * reasons stay unavailable.
 *
 * Marks: a pool whose node still answered 503 is *saturated* (free = 0) until its next heartbeat or
 * `saturationMs`, whichever comes first; a pool whose dispatch failed is *suspect* (free = 0) until
 * its node's next heartbeat; a pool whose drain was forwarded is draining until the next heartbeat.
 */

/** How long before a heartbeat was sent a lease release may still show as a busy slot in it, ms. */
export const RELEASE_LAG_MS = 100;
/** Release times kept per pool (the most a heartbeat in flight can have missed, in practice). */
const RELEASES_KEPT = 64;

interface Account {
  /** `node_id/pool_id`, made once: placement looks pools up by it on every cache-aware decision. */
  readonly key: string;
  leases: number;
  leasesAtHeartbeat: number;
  /** When leases were released lately (ms, ascending, at most {@link RELEASES_KEPT}). */
  releases: number[];
  saturatedUntil: number;
  localDraining: boolean;
  /**
   * Slots other replicas lease on the pool, from the cluster's lease signals (Redis store); when
   * known it replaces the heartbeat's foreign busy slots, so a slot another replica freed is free
   * here at once, not at the node's next heartbeat. A heartbeat caps it at the busy slots it
   * reports beyond this replica's leases (a lost release signal cannot hold a slot for ever).
   */
  foreignLeases: number | undefined;
  /** Provisioning progress (0..1) and when it was seen, for an ETA. */
  progressAt: { value: number; at: number } | undefined;
  /** Measured provisioning speed, fraction per ms. */
  progressRate: number | undefined;
}

/** What a pool's view shows of its node. */
export interface NodeFacts {
  readonly state: NodeState;
  readonly address: string;
  readonly dispatch: DispatchTarget;
}

export class PoolAccounting {
  readonly #accounts = new Map<string, Account>();
  /** Keys with a finite saturation deadline, and the earliest one: their views change with time. */
  readonly #saturated = new Set<string>();
  #nextExpiry = Number.POSITIVE_INFINITY;
  readonly #saturationMs: number;

  constructor(saturationMs: number) {
    this.#saturationMs = saturationMs;
  }

  #account(nodeId: string, poolId: string): Account {
    const key = candidateKey({ node_id: nodeId, pool_id: poolId });
    let account = this.#accounts.get(key);
    if (account === undefined) {
      account = {
        key,
        leases: 0,
        leasesAtHeartbeat: 0,
        releases: [],
        saturatedUntil: 0,
        localDraining: false,
        foreignLeases: undefined,
        progressAt: undefined,
        progressRate: undefined,
      };
      this.#accounts.set(key, account);
    }
    return account;
  }

  /**
   * A heartbeat (or registration) reported the pool: marks end, busy slots are matched to our
   * leases (those held at `sentAt`, when the node built it, as far as we can tell), provisioning
   * speed is measured.
   */
  observe(nodeId: string, snap: PoolSnapshot, now: number, sentAt = now): void {
    const account = this.#account(nodeId, snap.pool_id);
    const since = sentAt - RELEASE_LAG_MS;
    const r = account.releases;
    let first = 0;
    while (first < r.length && (r[first] as number) < since) first += 1;
    if (first > 0) r.splice(0, first);
    account.leasesAtHeartbeat = account.leases + r.length;
    // Signals can be lost (a Redis restart forgets every lease without a release signal): the
    // others cannot hold more of the pool than its node reports busy beyond ours.
    if (account.foreignLeases !== undefined)
      account.foreignLeases = Math.min(
        account.foreignLeases,
        Math.max(0, snap.slots_total - snap.slots_free - account.leasesAtHeartbeat),
      );
    account.saturatedUntil = 0;
    this.#saturated.delete(candidateKey({ node_id: nodeId, pool_id: snap.pool_id }));
    account.localDraining = false;
    if (snap.progress !== undefined && (snap.state === 'provisioning' || snap.state === 'starting')) {
      const value = (snap.progress.engine + snap.progress.model) / 2;
      const prev = account.progressAt;
      if (prev !== undefined && value > prev.value && now > prev.at)
        account.progressRate = (value - prev.value) / (now - prev.at);
      account.progressAt = { value, at: now };
    } else {
      account.progressAt = undefined;
      account.progressRate = undefined;
    }
  }

  take(nodeId: string, poolId: string): void {
    this.#account(nodeId, poolId).leases += 1;
  }

  give(nodeId: string, poolId: string, now: number): void {
    const account = this.#account(nodeId, poolId);
    account.leases = Math.max(0, account.leases - 1);
    account.releases.push(now);
    if (account.releases.length > RELEASES_KEPT) account.releases.shift();
  }

  markSaturated(nodeId: string, poolId: string, now: number): void {
    const until = now + this.#saturationMs;
    this.#account(nodeId, poolId).saturatedUntil = until;
    this.#saturated.add(candidateKey({ node_id: nodeId, pool_id: poolId }));
    this.#nextExpiry = Math.min(this.#nextExpiry, until);
  }

  markSuspect(nodeId: string, poolId: string): void {
    this.#account(nodeId, poolId).saturatedUntil = Number.POSITIVE_INFINITY;
    this.#saturated.delete(candidateKey({ node_id: nodeId, pool_id: poolId }));
  }

  /** Sets the leases other replicas hold on the pool; true when that may have freed a slot here (fewer than before, or first known). */
  setForeignLeases(key: string, n: number): boolean {
    const account = this.#accounts.get(key);
    if (account === undefined) return false;
    const before = account.foreignLeases;
    account.foreignLeases = Math.max(0, n);
    return before === undefined || account.foreignLeases < before;
  }

  markDraining(nodeId: string, poolId: string): void {
    this.#account(nodeId, poolId).localDraining = true;
  }

  /**
   * Calls `expired` with the key of each pool whose saturation ran out by `now` (its free slots
   * count again, so its view must be rebuilt). Costs one comparison until the earliest one is due.
   */
  expireSaturations(now: number, expired: (key: string) => void): void {
    if (now < this.#nextExpiry) return;
    let next = Number.POSITIVE_INFINITY;
    for (const key of this.#saturated) {
      const until = this.#accounts.get(key)?.saturatedUntil ?? 0;
      if (until > now) {
        next = Math.min(next, until);
        continue;
      }
      this.#saturated.delete(key);
      expired(key);
    }
    this.#nextExpiry = next;
  }

  /** The pool's view: its snapshot, its node, and the accounting above applied to its free slots. */
  view(nodeId: string, node: NodeFacts, snap: PoolSnapshot, now: number): PoolView {
    const account = this.#account(nodeId, snap.pool_id);
    const total = snap.slots_total;
    const busyReported = Math.max(0, total - snap.slots_free);
    const foreignBusy = account.foreignLeases ?? Math.max(0, busyReported - account.leasesAtHeartbeat);
    let free = Math.min(total, Math.max(0, total - account.leases - foreignBusy));
    if (account.saturatedUntil > now) free = 0;
    const progress = account.progressAt;
    const eta =
      progress !== undefined && account.progressRate !== undefined && account.progressRate > 0
        ? Math.round((1 - progress.value) / account.progressRate)
        : undefined;
    return {
      key: account.key,
      node_id: nodeId,
      pool_id: snap.pool_id,
      node_state: node.state,
      state: snap.state,
      ready: snap.ready,
      draining: snap.draining || account.localDraining,
      slots_total: total,
      free,
      leased: account.leases,
      models: snap.models,
      aliases: snap.aliases,
      deterministic: snap.deterministic,
      ctx: snap.ctx,
      capabilities: snap.capabilities,
      address: node.address,
      dispatch: node.dispatch,
      snapshot: snap,
      provisioningEtaMs: eta,
    };
  }
}
