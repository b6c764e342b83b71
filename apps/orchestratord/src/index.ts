export { buildApp, REDACT_PATHS } from './app.js';
export type { AppDeps, AppTuning, OrchdApp } from './app.js';
export { loadConfig } from './config.js';
export type { LoadConfigOptions } from './config.js';
export { startServer } from './server.js';
export type { StartOptions, RunningServer } from './server.js';
export { AdmissionQueue } from './admission/admission-queue.js';
export type {
  Lane,
  QueuePolicy,
  QueueEntry,
  EnqueueResult,
  AdmissionQueueOptions,
} from './admission/admission-queue.js';
export { Predictor, onTimeProbability } from './admission/predictor.js';
export type { Prediction, PredictorPool } from './admission/predictor.js';
export { place, isEligible, compareLeastLoaded } from './scheduling/placement.js';
export type {
  PlacementRequest,
  PlacementDecision,
  PlacementStrategy,
  PlacementReason,
  RoundRobinCursor,
} from './scheduling/placement.js';
export { Scheduler } from './scheduling/scheduler.js';
export type { Schedulable, SchedulerEvents, SchedulerOptions, WaitingLine } from './scheduling/scheduler.js';
export { PlacementTicket } from './scheduling/placement-ticket.js';
export { NodeRegistry } from './registry/node-registry.js';
export type { NodeRegistryOptions, RegistryEvent, RegistryState } from './registry/node-registry.js';
export { isPlaceable, compareCandidates, candidateKey, servesModel } from './registry/pool-view.js';
export type { PoolCandidate, PoolView, CandidateIndex, Lease } from './registry/pool-view.js';
export { TaskService } from './tasks/task-service.js';
export type {
  TaskServiceOptions,
  AdmissionResult,
  Admitted,
  CancelResult,
  CancelReason,
  TaskServiceState,
} from './tasks/task-service.js';
export type { TaskEvent, TaskEventListener, EndedTask, TaskOutcome } from './tasks/task-events.js';
export type { TaskLoad } from './tasks/task-load.js';
export { DashboardFeed } from './dashboard/dashboard-feed.js';
export type { DashboardFeedOptions, DashboardFeedState, DashboardListener } from './dashboard/dashboard-feed.js';
export { toClusterPool } from './registry/cluster-pool.js';
export { TaskStream } from './streams/task-stream.js';
export type { TaskStreamState } from './streams/task-stream.js';
export { PoolClient } from './upstream/pool-client.js';
export type { PoolClientOptions, PoolOperationReply, DispatchTarget } from './upstream/pool-client.js';
export { runAttempt, failurePolicy } from './upstream/dispatch-attempt.js';
export type { AttemptInput, AttemptOutcome, Penalty, TokenSink } from './upstream/dispatch-attempt.js';
export {
  DispatchFailure,
  UpstreamConnectError,
  UpstreamStreamError,
  PoolSaturatedError,
  DispatchInvalidError,
  PoolRefusedError,
  EngineError,
  NodeLostError,
} from './upstream/upstream-errors.js';
export { readDispatchEvents } from './upstream/dispatch-events.js';
export { SessionStore } from './sessions/session-store.js';
export { MemoryCatalog } from './store/memory/memory-catalog.js';
export type { MemoryCatalogState } from './store/memory/memory-catalog.js';
export type {
  CatalogStore,
  CatalogModelEntry,
  CatalogRegistration,
  CatalogPutOutcome,
  LoadClaim,
  LoadClaimOutcome,
} from './store/catalog-store.js';
export { ModelLoads } from './catalog/model-loads.js';
export type { LoadOutcome, UnloadOutcome } from './catalog/model-loads.js';
export {
  OrchdError,
  InvalidParamsError,
  DeadlineUnmetError,
  UnauthorizedError,
  NotFoundError,
  PayloadTooLargeError,
  QueueFullError,
  BudgetSpentError,
  ModelNotAvailableError,
  ModelNotFoundError,
  ConflictError,
  InsufficientMemoryError,
  ModelLoadFailedError,
  PoolUnavailableError,
  PoolUnreadyError,
  InternalError,
  ConfigError,
} from './errors.js';
export type { OrchdErrorOptions } from './errors.js';
