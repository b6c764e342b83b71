import type { DashboardSnapshot } from '@llama-orch/contracts';

/** A `snapshot` frame that is not a DashboardSnapshot: the stream is treated as broken and reconnected. */
export class MalformedSnapshotError extends Error {
  override readonly name = 'MalformedSnapshotError';
}

const isArray = Array.isArray;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !isArray(v);

/**
 * Whether `v` has the shape the page relies on, not every field: the contract's zod schema would
 * put zod in the bundle for a document orchestratord already builds from the same types.
 */
function isSnapshot(v: Record<string, unknown>): v is Record<string, unknown> & DashboardSnapshot {
  return (
    typeof v.version === 'string' &&
    typeof v.generated_at_ms === 'number' &&
    typeof v.bucket_ms === 'number' &&
    isArray(v.nodes) &&
    isArray(v.pools) &&
    isObject(v.queue) &&
    isObject(v.queue.depth) &&
    isArray(v.throughput) &&
    isArray(v.recent_tasks) &&
    isArray(v.replicas) &&
    isArray(v.model_events)
  );
}

/** Parses one snapshot frame (see {@link isSnapshot}). Throws MalformedSnapshotError rather than rendering half a page. */
export function parseSnapshot(data: string): DashboardSnapshot {
  let v: unknown;
  try {
    v = JSON.parse(data);
  } catch {
    throw new MalformedSnapshotError('snapshot frame is not JSON');
  }
  if (!isObject(v)) throw new MalformedSnapshotError('snapshot frame lacks the DashboardSnapshot fields');
  // An older replica behind the same load balancer sends no `replicas`: the page shows none rather than reconnecting for ever.
  if (!isArray(v.replicas)) v.replicas = [];
  // Nor `model_events` (before models on demand): an empty feed.
  if (!isArray(v.model_events)) v.model_events = [];
  if (!isSnapshot(v)) throw new MalformedSnapshotError('snapshot frame lacks the DashboardSnapshot fields');
  return v;
}
