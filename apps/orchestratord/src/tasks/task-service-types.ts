import type { Tracer } from '@opentelemetry/api';
import type { CoordinatorFactory } from './task-coordinator.js';
import type { QueuePolicy } from '../admission/admission-queue.js';
import type { NodeRegistry } from '../registry/node-registry.js';
import type { CatalogStore } from '../store/catalog-store.js';
import type { ModelLoads } from '../catalog/model-loads.js';
import type { RoomWaits } from '../catalog/room-waits.js';
import type { PlacementStrategy } from '../scheduling/placement.js';
import type { PrefixRouting } from '../prefix/prefix-routing.js';
import type { Clock } from '@llama-orch/daemon-support';
import type { OrchdMetrics } from '../support/metrics.js';
import type { PoolClient } from '../upstream/pool-client.js';
import type { TaskJournal } from './task-journal.js';
import type { TaskLoad } from './task-load.js';
import type { CancelReason } from './task-observer.js';

/** TaskService's options and the types of its answers (the class is in task-service.ts). */

export interface TaskServiceOptions {
  registry: NodeRegistry;
  /** The cluster's side of a task's moments: `LocalCoordinator` in one process, `SharedCoordinator` with the cluster store. */
  coordinator: CoordinatorFactory;
  poolClient: PoolClient;
  metrics: OrchdMetrics;
  clock: Clock;
  admissionCapacity: number;
  admissionPolicy: QueuePolicy;
  placementStrategy: PlacementStrategy;
  /**
   * The prefix index (`cache-aware` placement reads it; each placement and answer teaches it).
   * @default none: cache-aware places as least-loaded
   */
  prefixes?: Pick<PrefixRouting, 'matches' | 'occupancy' | 'placed' | 'answered'> | undefined;
  /** Largest ctx accepted when no pool reports one. */
  ctxMax: number;
  /**
   * The fleet catalog, read when no pool serves a task's model: a catalog model (or alias) not
   * loaded is 503 MODEL_NOT_AVAILABLE, any other name 404 MODEL_NOT_FOUND. @default none: every
   * name no pool serves is 404
   */
  catalog?: Pick<CatalogStore, 'get'> | undefined;
  /**
   * Loads a catalog model no pool serves on its first request (spec 67), instead of the 503 above;
   * admission waits up to `waitMs` for the node to report the new pool, then the task waits in the
   * queue while the pool prepares. @default none: a catalog model loaded nowhere is 503
   */
  loads?:
    | {
        readonly loader: Pick<ModelLoads, 'whenServable'>;
        readonly waitMs: number;
        /** Where a model no node has room for waits, its tasks queued (room-waits.ts); absent = 503. */
        readonly room?: Pick<RoomWaits, 'wait' | 'waitingFor' | 'waitsFor'> | undefined;
      }
    | undefined;
  /** Makes each task's spans (task-trace.ts). @default none: tracing off, no span work */
  tracer?: Tracer | undefined;
  /** Writes each task's record for `GET /v2/tasks` (task-journal.ts). @default none: no records */
  journal?: TaskJournal | undefined;
  /** How long an ended task's frames stay readable, ms. */
  streamGraceMs: number;
  /** Most ended tasks kept readable; the oldest go first past it. @default 100000 */
  streamGraceMaxTasks?: number;
  /** Housekeeping period (deadlines, metrics frames, retention), ms. @default 100 */
  tickMs?: number;
  /** Period of `metrics` frames while a task waits, ms. @default 1000 */
  metricsIntervalMs?: number;
  /** Re-placements after a failure before the first token. @default 1 */
  maxRetries?: number;
  /** How long close() waits for in-flight upstream requests to unwind, ms. @default 2000 */
  closeTimeoutMs?: number;
}

export type { AdmissionResult, Admitted } from './task-coordinator.js';

export type CancelResult = 'canceled' | 'already-ended' | 'unknown';
export type { CancelReason, TaskLoad };
export type TaskServiceState = 'running' | 'closing' | 'closed';
