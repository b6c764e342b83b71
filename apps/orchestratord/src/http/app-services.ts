import type { OrchestratorConfig, SessionInfo } from '@llama-orch/contracts';
import type { FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import type { ModelLoads } from '../catalog/model-loads.js';
import type { DashboardFeed } from '../dashboard/dashboard-feed.js';
import type { ClusterNodeSync } from '../registry/cluster-node-sync.js';
import type { NodeRegistry } from '../registry/node-registry.js';
import type { ReplicaDirectory } from '../replicas/replica-directory.js';
import type { ReplicaIdentity } from '../replicas/replica-identity.js';
import type { Clock } from '@llama-orch/daemon-support';
import type { SessionStore } from '../sessions/session-store.js';
import type { CatalogStore } from '../store/catalog-store.js';
import type { ClusterStore } from '../store/cluster-store.js';
import type { OrchdMetrics } from '../support/metrics.js';
import type { TaskOwnerProxy } from './task-owner-proxy.js';
import type { TaskRecords } from '../tasks/task-records.js';
import type { TaskService } from '../tasks/task-service.js';
import type { PoolClient } from '../upstream/pool-client.js';

/** The long-lived objects route plugins work with; passed to each plugin as its options. */
export interface AppServices {
  readonly config: Readonly<OrchestratorConfig>;
  readonly registry: NodeRegistry;
  /** With a shared (Redis) store: the node routes write through it. Undefined in-process (the registry is the store). */
  readonly nodeSync: ClusterNodeSync | undefined;
  readonly tasks: TaskService;
  /** Task records clients look up (`GET /v2/tasks`), live here or from the store. */
  readonly taskRecords: TaskRecords;
  /** The cluster store the app runs on (in-process or Redis). */
  readonly store: ClusterStore;
  /** With a Redis store: passes requests for tasks other replicas own to them. Undefined in-process. */
  readonly owners: TaskOwnerProxy | undefined;
  /** This process's sessions (the task service's, in-process). */
  readonly sessions: SessionStore;
  /** What the session routes answer from: `sessions`, or the cluster's with a Redis store. */
  readonly sessionReader: SessionReader;
  /** The fleet catalog (`store.catalog`: this process's, or the cluster's with Redis). */
  readonly catalog: CatalogStore;
  /** Loads and unloads of catalog models on the nodes. */
  readonly models: ModelLoads;
  readonly poolClient: PoolClient;
  readonly metrics: OrchdMetrics;
  readonly metricsRegistry: Registry;
  readonly clock: Clock;
  /** What the web dashboard shows, pushed on change. */
  readonly dashboard: DashboardFeed;
  /** This replica's id and address, and the live replicas (`directory.addressOf(id)` reaches another one directly). */
  readonly replicas: { readonly identity: ReplicaIdentity; readonly directory: ReplicaDirectory };
  /** Absolute base URL clients reach this server at (no trailing slash). */
  publicBase(req: FastifyRequest): string;
}

/** What the session routes read and delete (SessionStore in-process, SessionAffinityStore with Redis). */
export interface SessionReader {
  get(id: string): SessionInfo | undefined | Promise<SessionInfo | undefined>;
  delete(id: string): boolean | Promise<boolean>;
}

export interface ServicesOptions {
  services: AppServices;
}
