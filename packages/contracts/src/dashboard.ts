import { z } from 'zod';
import { ClusterPoolSchema } from './control.js';
import { ErrorCodeSchema } from './errors.js';
import { NodeInfoSchema } from './nodes.js';

/** How a recent task ended, as the dashboard lists it. */
export const DashboardOutcomeSchema = z.enum(['ok', 'error', 'canceled']);
export type DashboardOutcome = z.infer<typeof DashboardOutcomeSchema>;

/** One ended task in the dashboard's "recent tasks" list (newest first). */
export const DashboardTaskSchema = z
  .strictObject({
    task_id: z.string(),
    /** The admitting request's correlation id (what the logs of both daemons carry). */
    correlation_id: z.string(),
    /** Model as the client named it. */
    model: z.string(),
    priority: z.enum(['interactive', 'batch']),
    /** Where it ran; absent when it never left the queue. */
    node_id: z.string().optional(),
    pool_id: z.string().optional(),
    tokens_out: z.int().nonnegative(),
    /** Admission to first token, ms; absent when no token came. */
    ttft_ms: z.number().nonnegative().optional(),
    /** Admission to end, ms. */
    duration_ms: z.number().nonnegative(),
    outcome: DashboardOutcomeSchema,
    /** Error code when `outcome` is `error`. */
    code: ErrorCodeSchema.optional(),
    /** End time, ms since the Unix epoch. */
    ended_at_ms: z.int().nonnegative(),
  })
  .meta({ id: 'DashboardTask' });
export type DashboardTask = z.infer<typeof DashboardTaskSchema>;

/** One bucket of the live throughput series (oldest first, fixed-width buckets). */
export const ThroughputPointSchema = z
  .strictObject({
    /** Bucket start, ms since the Unix epoch. */
    t_ms: z.int().nonnegative(),
    /** Tokens relayed to clients per second over the bucket. */
    tokens_per_s: z.number().nonnegative(),
    /** Median time to first token of the tasks whose first token fell in the bucket, ms; absent when none. */
    ttft_p50_ms: z.number().nonnegative().optional(),
    /** Tasks that ended in the bucket. */
    tasks_ended: z.int().nonnegative(),
  })
  .meta({ id: 'ThroughputPoint' });
export type ThroughputPoint = z.infer<typeof ThroughputPointSchema>;

/** The admission queue now. */
export const DashboardQueueSchema = z
  .strictObject({
    depth: z.strictObject({ interactive: z.int().nonnegative(), batch: z.int().nonnegative() }),
    capacity: z.int().nonnegative(),
    /** Tasks running on pools now. */
    running: z.int().nonnegative(),
    /** Predicted wait before a new interactive task starts, ms (the admission predictor's figure). */
    predicted_wait_ms: z.number().nonnegative(),
  })
  .meta({ id: 'DashboardQueue' });
export type DashboardQueue = z.infer<typeof DashboardQueueSchema>;

/**
 * One orchestratord replica sharing the cluster store (one entry without a store: this process),
 * as it last announced itself (every heartbeat interval; gone after 3 silent ones or a clean stop).
 */
export const DashboardReplicaSchema = z
  .strictObject({
    /** `ORCHD_REPLICA_ID`, else `<hostname>-<pid>`. */
    replica_id: z.string(),
    /** Where the other replicas reach it directly: `ORCHD_ADVERTISE_URL`, else its bound address. */
    address: z.string(),
    /** Its orchestratord version. */
    version: z.string(),
    /** When it started, ms since the Unix epoch. */
    up_since_ms: z.int().nonnegative(),
    /** Tasks it relayed (dispatched to a node and ended) since it started. */
    tasks_relayed: z.int().nonnegative(),
    /** Streams it relays now. */
    load: z.int().nonnegative(),
  })
  .meta({ id: 'DashboardReplica' });
export type DashboardReplica = z.infer<typeof DashboardReplicaSchema>;

/**
 * What a `DashboardModelEvent` says happened: a load started (a node accepted it), became ready,
 * failed, or its pool left the node before it was ready; or a copy started unloading.
 */
export const DashboardModelEventKindSchema = z.enum(['load_started', 'load_ready', 'load_failed', 'load_vanished', 'unloading']);
export type DashboardModelEventKind = z.infer<typeof DashboardModelEventKindSchema>;

/** Why a copy unloads: an operator asked, it was idle past its `idle_ttl_s`, it was evicted for another model's load, or swapped out for a model that waited for room. */
export const DashboardUnloadCauseSchema = z.enum(['operator', 'idle', 'eviction', 'swap']);
export type DashboardUnloadCause = z.infer<typeof DashboardUnloadCauseSchema>;

/** One entry of the dashboard's live feed of models on demand (newest first): a load or an unload of one copy. */
export const DashboardModelEventSchema = z
  .strictObject({
    /** When it happened, ms since the Unix epoch. */
    at_ms: z.int().nonnegative(),
    kind: DashboardModelEventKindSchema,
    /** The catalog model (its ref). */
    model: z.string(),
    node_id: z.string(),
    pool_id: z.string(),
    /** Why it unloads (`unloading` only). */
    cause: DashboardUnloadCauseSchema.optional(),
    /** In words: why the load failed (`load_failed`), why the copy unloads (`unloading`: idle time, the model it made room for, the drain deadline). */
    detail: z.string().optional(),
  })
  .meta({ id: 'DashboardModelEvent' });
export type DashboardModelEvent = z.infer<typeof DashboardModelEventSchema>;

/**
 * `GET /v2/dashboard` and the `snapshot` event of `GET /v2/dashboard/events`: everything the web
 * dashboard shows, in one document. The event stream sends one on connect and another whenever the
 * registry or the task service changed something (coalesced), so the page never polls.
 */
export const DashboardSnapshotSchema = z
  .strictObject({
    /** orchestratord's version. */
    version: z.string(),
    /** When this snapshot was taken, ms since the Unix epoch. */
    generated_at_ms: z.int().nonnegative(),
    /** Width of one throughput bucket, ms. */
    bucket_ms: z.int().positive(),
    nodes: z.array(NodeInfoSchema),
    pools: z.array(ClusterPoolSchema),
    queue: DashboardQueueSchema,
    throughput: z.array(ThroughputPointSchema),
    recent_tasks: z.array(DashboardTaskSchema),
    /** The live replicas, by id. Recent tasks and throughput are the whole cluster's, whichever replica answers. */
    replicas: z.array(DashboardReplicaSchema),
    /** Loads and unloads of catalog models this replica started or saw end, newest first (at most 50). */
    model_events: z.array(DashboardModelEventSchema),
  })
  .meta({ id: 'DashboardSnapshot' });
export type DashboardSnapshot = z.infer<typeof DashboardSnapshotSchema>;
