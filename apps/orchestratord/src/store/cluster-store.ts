import { OrchestratorConfigSchema, type OrchestratorConfig } from '@llama-orch/contracts';
import type { Clock, Log } from '@llama-orch/daemon-support';
import { z } from 'zod';
import type { ActivityStore } from './activity-store.js';
import type { AdmissionQueueStore } from './admission-queue-store.js';
import type { CatalogStore } from './catalog-store.js';
import type { ClusterSignals } from './cluster-signals.js';
import type { PrefixShare } from './prefix-share.js';
import type { NodeLivenessStore } from './node-liveness-store.js';
import type { RateLimitStore } from './rate-limit-store.js';
import type { ReplicaMembershipStore } from './replica-membership-store.js';
import type { ResponseStore } from './response-store.js';
import type { SessionAffinityStore } from './session-affinity-store.js';
import type { SlotLeaseStore } from './slot-lease-store.js';
import type { TaskLifecycleStore } from './task-lifecycle-store.js';
import type { TaskOwnershipStore } from './task-ownership-store.js';
import type { TaskRecordStore } from './task-record-store.js';

/**
 * The store settings, taken from orchestratord's configuration (one source of truth: the same
 * fields, the same validation) plus the store's own timeout.
 */
export const ClusterStoreSettingsSchema = OrchestratorConfigSchema.pick({
  redis_url: true,
  redis_prefix: true,
  admission_capacity: true,
  admission_policy: true,
  heartbeat_interval_ms: true,
  session_ttl_ms: true,
  session_max: true,
  session_token_budget: true,
  state_dir: true,
  task_retention_count: true,
}).extend({
  /** A Redis command not answered in this time fails (StoreUnavailableError), ms. @default 2000 */
  command_timeout_ms: z.number().int().min(10).max(60_000).default(2000),
});
export type ClusterStoreSettings = z.infer<typeof ClusterStoreSettingsSchema>;
export type ClusterStoreSettingsInput = z.input<typeof ClusterStoreSettingsSchema>;

/** The store's settings out of orchestratord's (validated) configuration. */
export function storeSettingsOf(config: Readonly<OrchestratorConfig>): ClusterStoreSettings {
  return ClusterStoreSettingsSchema.parse({
    redis_url: config.redis_url,
    redis_prefix: config.redis_prefix,
    admission_capacity: config.admission_capacity,
    admission_policy: config.admission_policy,
    heartbeat_interval_ms: config.heartbeat_interval_ms,
    session_ttl_ms: config.session_ttl_ms,
    session_max: config.session_max,
    session_token_budget: config.session_token_budget,
    state_dir: config.state_dir,
    task_retention_count: config.task_retention_count,
  });
}

export type StoreHealth =
  | { readonly ok: true; readonly kind: 'memory' | 'redis'; readonly latency_ms: number }
  | { readonly ok: false; readonly kind: 'redis'; readonly error: string };

/**
 * The parts every store has: what one process uses whatever its store (the per-key rate limits,
 * its announcement in the replica list, the dashboard's activity, the fleet catalog), its health and
 * its close.
 */
export interface ProcessStore {
  /** `memory`: this process only; `redis`: shared by every replica pointed at the same Redis and prefix. */
  readonly kind: 'memory' | 'redis';
  readonly rateLimits: RateLimitStore;
  readonly replicas: ReplicaMembershipStore;
  /** The dashboard's recent tasks and throughput, cluster-wide. */
  readonly activity: ActivityStore;
  /**
   * The fleet catalog (models on demand, .specs/67-models-on-demand.md): in-process, this process's
   * (kept in `state_dir` when set); with Redis, the cluster's.
   */
  readonly catalog: CatalogStore;
  /**
   * The prefix index's news between replicas (.specs/68-prefix-routing.md): in-process, this
   * process's own subscribers; with Redis, every replica's.
   */
  readonly prefixes: PrefixShare;
  /**
   * The task records clients look up (`GET /v2/tasks/{id}`, `GET /v2/tasks`), at most
   * `task_retention_count`: in-process, this process's tasks; with Redis, every replica's, so any
   * replica answers for a task another one holds.
   */
  readonly taskRecords: TaskRecordStore;
  /**
   * The stored Responses (`/v1/responses` with `store`), at most `task_retention_count`:
   * in-process, this process's; with Redis, every replica's (a client's next turn may land on any).
   */
  readonly responses: ResponseStore;
  /** Whether the store answers now (a PING with Redis); never throws. */
  health(): Promise<StoreHealth>;
  /** Releases connections within a bounded time; idempotent. */
  close(): Promise<void>;
}

/**
 * The in-process store (the default): one process's parts only. One process keeps its nodes, queue,
 * tasks and sessions in its own objects (the node registry, the local coordinator), synchronously.
 */
export interface LocalStore extends ProcessStore {
  readonly kind: 'memory';
  readonly shared: false;
}

/**
 * A store replicas share (see .specs/65-cluster-store.md): besides a process's parts, the cluster's
 * nodes, slot leases, queue, task records, sessions, the task lifecycle steps over them, and the
 * signals of their changes. The Redis store is the product's one; the contract tests also run each
 * part against the reference model (testing/reference-store/).
 */
export interface SharedStore extends ProcessStore {
  readonly shared: true;
  readonly nodes: NodeLivenessStore;
  readonly leases: SlotLeaseStore;
  readonly queue: AdmissionQueueStore;
  readonly tasks: TaskOwnershipStore;
  readonly sessions: SessionAffinityStore;
  /** A task's admission, dispatch, requeue and end, each one atomic step over `queue`, `tasks` and `sessions` (one round trip). */
  readonly lifecycle: TaskLifecycleStore;
  /** Lease and queue changes, pushed to every replica (cluster-signals.ts). */
  readonly signals: ClusterSignals;
}

/** What `createClusterStore` builds: `shared` tells which (the app builds the shared coordinator only on a shared store). */
export type ClusterStore = LocalStore | SharedStore;

export interface ClusterStoreDeps {
  /** The in-process store's clock (the Redis store uses the server's). */
  clock: Clock;
  logger: Log;
}
