export { logDestination } from './log-destination.js';
export type { LogDestination, LogDestinationOptions } from './log-destination.js';
export { closeAll, onceClose, CloseTimeoutError } from './close-all.js';
export type { CloseStep, CloseReport, CloseLog } from './close-all.js';
export { parsePrometheusText } from './prom-text.js';
export type { PromFamily, PromSample, PromText, PromType } from './prom-text.js';
export { metricNamingProblems } from './metric-naming.js';
export type { MetricNamingRules } from './metric-naming.js';
export { registerProcessMetrics, DROPPED_STANDARD_GAUGES } from './process-metrics.js';
export { openMetricsText, acceptsOpenMetrics, OPENMETRICS_CONTENT_TYPE } from './open-metrics.js';
export { installGracefulExit, STOPPING_MESSAGE, FORCED_EXIT_CODE } from './graceful-exit.js';
export type { GracefulExitOptions, GracefulExitLog, ShutdownCause } from './graceful-exit.js';
export { listenQuietly } from './listen-quietly.js';
export type { Listenable, ListenOptions } from './listen-quietly.js';
export { isLoopbackHost, splitHostPort } from './address.js';
export { freeLoopbackPort } from './free-port.js';
export { systemClock } from './clock.js';
export type { Clock, SleepingClock } from './clock.js';
export type { Log } from './log.js';
export { LazyChildLogger } from './lazy-child-logger.js';
export type { LineLevel, LogRoot } from './lazy-child-logger.js';
export { parseDaemonArgv, readPackageVersion } from './argv.js';
export type { ArgvOutcome, DaemonArgvSpec } from './argv.js';
export { correlationIdFor, correlationPlugin } from './http/correlation.js';
export { lazyChildLoggerFactory, ownOptions } from './http/request-logger.js';
export {
  bearerAuthPlugin,
  bearerAuthOptions,
  bearerToken,
  credentialLookup,
  sha256,
  tokenMatches,
} from './http/bearer-auth.js';
export type { BearerAuthOptions, BearerCredential } from './http/bearer-auth.js';
export {
  sendErrorEnvelope,
  backoffMs,
  backoffHeaders,
  describeValidation,
  requestError,
  BACKOFF_FLOOR_MS,
  DEFAULT_BACKOFF_MS,
} from './http/error-envelope.js';
export type { EnvelopeReply } from './http/error-envelope.js';
export { findPromtool, promtoolCheckMetrics } from './testing/promtool.js';
export type { FindPromtoolOptions } from './testing/promtool.js';
export { aptGet, ensureDebianPackage, DEBIAN_INSTALL_TIMEOUT_MS } from './testing/debian-package.js';
export type { EnsureDebianPackageOptions } from './testing/debian-package.js';
