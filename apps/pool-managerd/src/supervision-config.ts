import type { SupervisionConfig } from '@llama-orch/contracts';
import { DEFAULT_SUPERVISION, type SupervisionSettings } from './pool-controller.js';

/** YAML `supervision` (snake_case, all optional) over the DESIGN §5 defaults. */
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
