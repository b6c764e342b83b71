import type { Logger } from 'pino';
import type { OnDemandConfig, PoolConfig } from '@llama-orch/contracts';
import type { Clock } from '@llama-orch/daemon-support';
import type { EngineProvisioner } from '@llama-orch/engine-provisioner';
import type { ModelProvisioner } from '@llama-orch/model-provisioner';
import type { SupervisionSettings } from '../supervision/settings.js';
import type { ResidentBytes } from '../support/process-memory.js';
import type { RotatingLogOptions } from '../support/rotating-log.js';
import type { RuntimeDir } from '../support/runtime-dir.js';
import type { DispatchLogger } from './dispatch.js';
import type { DispatchTrace } from './dispatch-trace.js';

// The options of PoolManager and of its dispatches, apart from the behaviour in pool-manager.ts.

export interface PoolManagerOptions {
  nodeId: string;
  pools: readonly PoolConfig[];
  runtime: RuntimeDir;
  logger: Logger;
  engines: Pick<EngineProvisioner, 'ensureBinary' | 'prepare'>;
  models: Pick<ModelProvisioner, 'ensure' | 'cachedFile'>;
  /** Load catalog models on orchestratord's request (`POST /v2/pools`); absent = refuse every load (409). */
  onDemand?: OnDemandConfig | undefined;
  /** Complete, scrubbed environment for engine processes. */
  engineEnv: Readonly<Record<string, string>>;
  /**
   * Exec-in-place prefix that ties engines to this process's life (setpriv); [] when unavailable.
   * May be a promise (main verifies setpriv while the pools provision); awaited before each spawn.
   */
  wrapper: readonly string[] | Promise<readonly string[]>;
  supervision: SupervisionSettings;
  engineLog?: RotatingLogOptions;
  /** Probe interval of adopted external engines, ms. @default 2000 */
  externalProbeMs?: number;
  /** How long an adopted engine may take to answer /health 200, ms. @default 30000 */
  adoptTimeoutMs?: number;
  /** Handoff watcher stability threshold, ms. @default 100 */
  handoffStabilityMs?: number;
  /** Tick of the engines' `/metrics` scrape, ms: the node's heartbeat interval, at least {@link ENGINE_SCRAPE_FLOOR_MS}. @default 5000 */
  engineMetricsIntervalMs?: number;
  /**
   * Settles once the daemon's HTTP API listens. Engines are provisioned, spawned and checked before
   * it (their start overlaps the daemon's own start-up), but no pool is reported ready and no
   * external engine is adopted until it settled, so a ready pool can always be reached.
   * @default settled (in-process use: the caller listens first)
   */
  serving?: Promise<void>;
  /** Time of pool state changes and `idle_since`. @default systemClock */
  clock?: Clock;
  /** Reads an engine's resident memory. @default `/proc/<pid>/status` VmRSS */
  residentBytes?: ResidentBytes;
}

/** Per-dispatch options of `PoolManager.openCompletion`. */
export interface OpenCompletionOptions {
  /** Aborted when the caller (the HTTP client) goes away: the engine request is aborted, its slot freed. */
  signal: AbortSignal;
  /** The dispatch's logger; its lines carry the caller's `correlation_id` binding (and, traced, `trace_id`/`span_id`). */
  log: DispatchLogger;
  /** The dispatch's spans when tracing is on: the lease's facts and the engine request are recorded on them. */
  trace?: DispatchTrace | undefined;
}

/**
 * The shortest interval between two scrapes of an engine's `/metrics`, ms. Upstream llama-server
 * notices that a non-streamed request's client went away only after a whole second in which no
 * result of any task reached that request's thread (`server_response::recv_with_timeout` restarts
 * its 1 s wait on every result, and a `/metrics` scrape is a task with a result): scraped every
 * second or more often, a cancelled non-streamed answer would hold its slot to the end of its
 * generation. Engines built with llama-orch's carried patch check at least once a second anyway;
 * the floor stays for those built without it (`source.patches: false`, external, adopted).
 */
export const ENGINE_SCRAPE_FLOOR_MS = 2000;
