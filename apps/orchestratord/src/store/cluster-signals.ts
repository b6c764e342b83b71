/**
 * Changes other replicas act on at once instead of at their next heartbeat or tick: the slots of a
 * pool leased across the cluster (a replica sees a slot another one freed), and a model's head of
 * the admission queue moving (the replica whose task is now first asks for it). A hint, never the
 * truth: the lease and queue scripts decide; a lost signal only delays a dispatch until the next
 * heartbeat or tick.
 */
export type ClusterSignal =
  /** `held` slots of the pool are leased across the cluster, after a change. */
  | { readonly kind: 'lease'; readonly poolKey: string; readonly held: number }
  /** An entry of `group` left the queue (taken, removed, expired): its first entry may have changed. */
  | { readonly kind: 'queue'; readonly group: string };

export type ClusterSignalListener = (signal: ClusterSignal) => void;

export interface ClusterSignals {
  /** Returns the unsubscribe function. */
  subscribe(listener: ClusterSignalListener): () => void;
}

/** One message on the signals channel: `lease\t<pool key>\t<held>` or `queue\t<group>`. */
export function parseSignal(message: string): ClusterSignal | undefined {
  const [kind, a, b] = message.split('\t');
  if (kind === 'lease' && a !== undefined && b !== undefined && /^\d+$/.test(b)) return { kind: 'lease', poolKey: a, held: Number(b) };
  if (kind === 'queue' && a !== undefined) return { kind: 'queue', group: a };
  return undefined;
}
