export { buildApp, REDACT_PATHS } from './app.js';
export type { AppDeps, AppTuning, OrchdApp } from './app.js';
export { loadConfig, isLoopbackHost, splitHostPort } from './config.js';
export type { LoadConfigOptions } from './config.js';
export { startServer } from './server.js';
export type { StartOptions, RunningServer } from './server.js';
export { AdmissionQueue } from './admission-queue.js';
export type { Lane, QueuePolicy, QueueEntry, EnqueueResult, AdmissionQueueOptions } from './admission-queue.js';
export { place, isEligible, isPlaceable, compareCandidates, compareLeastLoaded, candidateKey } from './placement.js';
export type {
  PoolCandidate, PlacementRequest, PlacementDecision, PlacementStrategy, PlacementReason, RoundRobinCursor,
} from './placement.js';
export { NodeRegistry } from './node-registry.js';
export type { NodeRegistryOptions, PoolView, Lease, RegistryEvent, RegistryState } from './node-registry.js';
export { TaskDispatcher } from './dispatcher.js';
export type { TaskDispatcherOptions, AdmissionResult, CancelResult, CancelReason, DispatcherState } from './dispatcher.js';
export { TaskStream } from './task-stream.js';
export type { TaskStreamState } from './task-stream.js';
export { PoolClient, UpstreamConnectError, UpstreamStreamError } from './pool-client.js';
export type { PoolClientOptions, DispatchStart, PoolOperationReply } from './pool-client.js';
export { Predictor, onTimeProbability } from './predictor.js';
export type { Prediction, PredictorPool } from './predictor.js';
export { SessionStore } from './session-store.js';
export { CatalogStore } from './catalog-store.js';
export type { CatalogInterest } from './catalog-store.js';
export { tokenMatches } from './plugins/auth.js';
export { systemClock } from './clock.js';
export type { Clock } from './clock.js';
export type { Log } from './log.js';
export {
  OrchdError, InvalidParamsError, DeadlineUnmetError, UnauthorizedError, NotFoundError, PayloadTooLargeError, QueueFullError,
  ModelNotAvailableError, PoolUnavailableError, PoolUnreadyError, InternalError, ConfigError,
} from './errors.js';
export type { OrchdErrorOptions } from './errors.js';
