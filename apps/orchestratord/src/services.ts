import type { OrchestratorConfig } from '@llama-orch/contracts';
import type { FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import type { CatalogStore } from './catalog-store.js';
import type { Clock } from './clock.js';
import type { TaskDispatcher } from './dispatcher.js';
import type { NodeRegistry } from './node-registry.js';
import type { PoolClient } from './pool-client.js';
import type { SessionStore } from './session-store.js';
import type { OrchdMetrics } from './metrics.js';

/** The long-lived objects route plugins work with; passed to each plugin as its options. */
export interface AppServices {
  readonly config: Readonly<OrchestratorConfig>;
  readonly registry: NodeRegistry;
  readonly dispatcher: TaskDispatcher;
  readonly sessions: SessionStore;
  readonly catalog: CatalogStore;
  readonly poolClient: PoolClient;
  readonly metrics: OrchdMetrics;
  readonly metricsRegistry: Registry;
  readonly clock: Clock;
  /** Absolute base URL clients reach this server at (no trailing slash). */
  publicBase(req: FastifyRequest): string;
}

export interface ServicesOptions {
  services: AppServices;
}
