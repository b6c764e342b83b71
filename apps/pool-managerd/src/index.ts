export { buildApp, buildDispatchApp } from './app.js';
export type { AppDeps, PoolManagerApp } from './app.js';
export { PoolManager } from './pools/pool-manager.js';
export type { PoolManagerOptions, OpenCompletionOptions } from './pools/pool-manager.js';
export { ManagedPool } from './pools/managed-pool.js';
export type { ManagedPoolOptions } from './pools/managed-pool.js';
export { ExternalPool } from './pools/external-pool.js';
export { AdoptedEngine } from './pools/adopted-engine.js';
export type { AdoptedEngineOptions } from './pools/adopted-engine.js';
export { PoolTable, UNREADY_RETRY_MS } from './pools/pool-table.js';
export type { Lease, EngineBinding, RegisterPoolOptions } from './pools/pool-table.js';
export { PoolStateMachine, canTransition } from './pools/pool-state.js';
export type { PoolStateChange } from './pools/pool-state.js';
export { runDispatch, DispatchAbort } from './pools/dispatch.js';
export type { DispatchOptions, DispatchLogger, DispatchEmit } from './pools/dispatch.js';
export { drain, waitForLeases } from './operations/drain.js';
export { reload } from './operations/reload.js';
export type { ReloadRequest } from './operations/reload.js';
export type {
  PoolOperation,
  PoolLifecycle,
  PoolLeases,
  OperablePool,
  ReloadablePool,
  ServedModel,
} from './operations/operable-pool.js';
export { Replica } from './replicas/replica.js';
export type { ReplicaOptions, ReplicaEvents, ReadyEngine } from './replicas/replica.js';
export { createEngineClients } from './replicas/engine-clients.js';
export type { EngineClients } from './replicas/engine-clients.js';
export { provision } from './provisioning/provision.js';
export type { ProvisionRequest, Provisioned } from './provisioning/provision.js';
export { writeHandoffFile, removeHandoffFile, handoffPath, managedHandoff } from './handoff/handoff-file.js';
export type { ManagedEngineFacts } from './handoff/handoff-file.js';
export { HandoffWatcher } from './handoff/handoff-watcher.js';
export type { HandoffWatcherOptions, HandoffRejectReason } from './handoff/handoff-watcher.js';
export { probeExternalEngine } from './handoff/adoption.js';
export type { ProbeOptions } from './handoff/adoption.js';
export { EngineMonitor } from './handoff/engine-monitor.js';
export type { EngineMonitorOptions } from './handoff/engine-monitor.js';
export { NodeClient } from './node/node-client.js';
export type { NodeClientOptions, NodeClientState } from './node/node-client.js';
export { detectCapabilities, detectGpus, parseNvidiaSmi, machineId } from './node/capabilities.js';
export type { NodeCapabilities } from './node/capabilities.js';
export { GpuMemoryMonitor, parseFreeMemory, withVramFree } from './node/gpu-memory.js';
export type { GpuMemoryMonitorOptions } from './node/gpu-memory.js';
export { EngineProcess } from './supervision/engine-process.js';
export type { EngineProcessOptions, EngineExit, EngineProcessState } from './supervision/engine-process.js';
export { Supervisor } from './supervision/supervisor.js';
export type {
  SupervisorOptions,
  SupervisorEvents,
  SupervisorState,
  SupervisedProcess,
} from './supervision/supervisor.js';
export { BackoffPolicy } from './supervision/backoff.js';
export type { BackoffOptions } from './supervision/backoff.js';
export { CircuitBreaker } from './supervision/circuit-breaker.js';
export type { CircuitBreakerOptions, BreakerState } from './supervision/circuit-breaker.js';
export { RestartLimiter } from './supervision/restart-limiter.js';
export type { RestartLimiterOptions } from './supervision/restart-limiter.js';
export { DEFAULT_SUPERVISION, supervisionSettings } from './supervision/settings.js';
export type { SupervisionSettings } from './supervision/settings.js';
export { PoolManagerMetrics } from './support/metrics.js';
export type { PoolStatusSource } from './support/metrics.js';
export { RotatingLogFile } from './support/rotating-log.js';
export type { RotatingLogOptions } from './support/rotating-log.js';
export { runtimeDir, claimRuntimeDir } from './support/runtime-dir.js';
export type { RuntimeDir } from './support/runtime-dir.js';
export { sweepStalePidFiles, isLlamaServerProcess } from './support/pid-files.js';
export { detectPdeathsigWrapper } from './support/setpriv.js';
export { createRootLogger } from './support/logging.js';
export type { RootLogger } from './support/logging.js';
export { loadSettings, loadPoolManagerConfig, parsePoolManagerConfig, parseArgv } from './config.js';
export type { DaemonSettings } from './config.js';
export {
  PoolManagerError,
  ConfigError,
  PoolNotFoundError,
  RetriableRefusal,
  PoolUnreadyError,
  ReplicaExhaustedError,
  EngineNotReachedError,
  PoolBusyError,
  PoolNotManagedError,
  InvalidTransitionError,
  EngineSpawnError,
  EngineReadinessError,
  HandoffError,
  RuntimeDirLockedError,
  UnauthorizedError,
  NodeRegistrationError,
} from './errors.js';
export type { PoolManagerErrorCode } from './errors.js';
