import type { SupervisionConfig } from '@llama-orch/contracts';
import type { SleepingClock } from '@llama-orch/daemon-support';

/** Supervision numbers (spec 50). Tests shrink them; the daemon uses {@link DEFAULT_SUPERVISION}. */
export interface SupervisionSettings {
  /** First restart delay, ms. @default 1000 */
  backoffBaseMs: number;
  /** Largest restart delay, ms. @default 60000 */
  backoffMaxMs: number;
  /** ± relative jitter. @default 0.1 */
  jitter: number;
  random?: () => number;
  /** Consecutive failures that open the breaker. @default 5 */
  breakerThreshold: number;
  /** Open breaker cool-down before a half-open trial (also the provisioning retry delay), ms. @default 300000 */
  breakerCooldownMs: number;
  /** Restart storm limit: restarts per window. @default 10 */
  restartMax: number;
  /** @default 60000 */
  restartWindowMs: number;
  /** Ready this long = stable: backoff reset, breaker closed, ms. @default 60000 */
  stableAfterMs: number;
  /** SIGTERM → SIGKILL grace, ms. @default 5000 */
  stopTimeoutMs: number;
  /** Spawn → /health 200 limit, ms. @default 120000 */
  readinessTimeoutMs: number;
  /** /health poll interval while loading, ms. @default 50 */
  readinessIntervalMs: number;
  clock?: SleepingClock;
}

export const DEFAULT_SUPERVISION: Readonly<SupervisionSettings> = Object.freeze({
  backoffBaseMs: 1000,
  backoffMaxMs: 60_000,
  jitter: 0.1,
  breakerThreshold: 5,
  breakerCooldownMs: 300_000,
  restartMax: 10,
  restartWindowMs: 60_000,
  stableAfterMs: 60_000,
  stopTimeoutMs: 5000,
  readinessTimeoutMs: 120_000,
  readinessIntervalMs: 50,
});

/** YAML `supervision` (snake_case, all optional) over the spec 50 defaults. */
export function supervisionSettings(cfg: SupervisionConfig | undefined): SupervisionSettings {
  const d = DEFAULT_SUPERVISION;
  return {
    ...d,
    backoffBaseMs: cfg?.backoff_base_ms ?? d.backoffBaseMs,
    backoffMaxMs: cfg?.backoff_max_ms ?? d.backoffMaxMs,
    breakerThreshold: cfg?.breaker_threshold ?? d.breakerThreshold,
    breakerCooldownMs: cfg?.breaker_cooldown_ms ?? d.breakerCooldownMs,
    restartMax: cfg?.restart_max ?? d.restartMax,
    restartWindowMs: cfg?.restart_window_ms ?? d.restartWindowMs,
    stableAfterMs: cfg?.stable_after_ms ?? d.stableAfterMs,
    stopTimeoutMs: cfg?.stop_timeout_ms ?? d.stopTimeoutMs,
    readinessTimeoutMs: cfg?.readiness_timeout_ms ?? d.readinessTimeoutMs,
  };
}
