/**
 * Changes other replicas act on at once instead of at their next heartbeat or tick: the slots of a
 * pool leased across the cluster (a replica sees a slot another one freed), and a model's head of
 * the admission queue moving (the replica whose task is now first asks for it). A hint, never the
 * truth: the lease and queue scripts decide; a lost signal only delays a dispatch until the next
 * heartbeat or tick.
 */
export type ClusterSignal =
  /**
   * `held` slots of the pool are leased across the cluster right after lease `leaseId` was granted
   * (`delta` 1) or released (−1). Signals arrive in the order the store applied the changes, so a
   * replica that follows its own leases in them knows how many of `held` are the others'.
   */
  | {
      readonly kind: 'lease';
      readonly poolKey: string;
      readonly held: number;
      readonly leaseId: string;
      readonly delta: 1 | -1;
    }
  /**
   * The queue of `group` changed (an entry came or left): its first entry in dispatch order is now
   * `head` (undefined: none), with that entry's payload (the task service puts its owner there).
   */
  | {
      readonly kind: 'queue';
      readonly group: string;
      readonly head: string | undefined;
      readonly headPayload: string | undefined;
    };

export type ClusterSignalListener = (signal: ClusterSignal) => void;

export interface ClusterSignals {
  /** Returns the unsubscribe function. */
  subscribe(listener: ClusterSignalListener): () => void;
}

/** One message on the signals channel: `lease\t<pool key>\t<held>\t<lease id>\t<+|->` or `queue\t<group>\t<head id>\t<head payload>` (empty: none). */
export function parseSignal(message: string): ClusterSignal | undefined {
  const [kind, a, b, c, d] = message.split('\t');
  if (
    kind === 'lease' &&
    a !== undefined &&
    b !== undefined &&
    /^\d+$/.test(b) &&
    c !== undefined &&
    (d === '+' || d === '-')
  ) {
    return { kind: 'lease', poolKey: a, held: Number(b), leaseId: c, delta: d === '+' ? 1 : -1 };
  }
  if (kind === 'queue' && a !== undefined && b !== undefined && c !== undefined) {
    return { kind: 'queue', group: a, head: b === '' ? undefined : b, headPayload: b === '' ? undefined : c };
  }
  return undefined;
}
