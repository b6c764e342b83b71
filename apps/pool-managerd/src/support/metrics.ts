import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { registerProcessMetrics } from '@llama-orch/daemon-support';
import type { PoolStatus } from '@llama-orch/contracts';
import { EngineSeries } from './engine-series.js';

const BREAKER_VALUE = { closed: 0, half_open: 1, open: 2 } as const;

/** What the pool gauges read at scrape time (the pool table). */
export interface PoolStatusSource {
  statuses(): readonly PoolStatus[];
}

/**
 * pool-managerd's Prometheus metrics, in its own prom-client Registry (never the default one),
 * named by the prometheus.io conventions: one `llorch_` prefix, base units, `_total` on counters
 * only (README "Metrics" lists the renames). Pool gauges are computed from the pool table at scrape
 * time, so they cannot drift from it. The engines' own metrics are {@link engines}
 * (`llorch_engine_*`); the process and Node.js series keep their standard names.
 */
export class PoolManagerMetrics {
  readonly registry = new Registry();
  readonly restarts: Counter<'pool_id'>;
  readonly handoffsProcessed: Counter<'mode'>;
  readonly handoffsRejected: Counter<'reason'>;
  readonly healthChecks: Counter<'pool_id' | 'result'>;
  readonly provisioningSeconds: Histogram<'pool_id' | 'phase' | 'outcome'>;
  readonly dispatches: Counter<'pool_id' | 'outcome'>;
  readonly tokensOut: Counter<'pool_id'>;
  readonly promptTokens: Counter<'pool_id'>;
  readonly cachedPromptTokens: Counter<'pool_id'>;
  /** Re-attachable dispatches that were re-attached, whose window passed, or that were cancelled by DELETE. */
  readonly reattach: Counter<'outcome'>;
  /** Loads on request (`POST /v2/pools`) by how they ended: ready, failed, canceled (unloaded first), refused. */
  readonly loads: Counter<'outcome'>;
  /** Pools loaded on request that were unloaded and left the node. */
  readonly unloads: Counter;
  /** The engines' `/metrics`, as the engine-metrics scraper last read them. */
  readonly engines: EngineSeries;

  constructor(pools: PoolStatusSource) {
    const r = this.registry;
    registerProcessMetrics(r);
    this.engines = new EngineSeries(r);
    const gauge = (name: string, help: string, value: (s: PoolStatus) => number): void => {
      new Gauge({
        name,
        help,
        labelNames: ['pool_id'],
        registers: [r],
        collect() {
          this.reset();
          for (const s of pools.statuses()) this.set({ pool_id: s.pool_id }, value(s));
        },
      });
    };
    gauge('llorch_pool_slots', 'Engine slots per pool.', (s) => s.slots_total);
    gauge('llorch_pool_slots_free', 'Slots not leased (0 when the pool is not ready).', (s) => s.slots_free);
    gauge('llorch_pool_active_leases', 'Leases held right now.', (s) => s.active_leases);
    gauge('llorch_pool_ready', '1 when the pool accepts leases.', (s) => (s.ready ? 1 : 0));
    gauge(
      'llorch_pool_breaker_state',
      'Supervisor circuit breaker: 0 closed, 1 half_open, 2 open.',
      (s) => BREAKER_VALUE[s.breaker],
    );
    gauge(
      'llorch_pool_decode_tokens_per_second',
      'Measured decode rate (moving average over streams).',
      (s) => s.decode_tps,
    );
    this.restarts = new Counter({
      name: 'llorch_pool_engine_restarts_total',
      help: 'Engine restarts after a crash or failed start.',
      labelNames: ['pool_id'],
      registers: [r],
    });
    this.handoffsProcessed = new Counter({
      name: 'llorch_handoff_files_processed_total',
      help: 'Handoff files ingested.',
      labelNames: ['mode'],
      registers: [r],
    });
    this.handoffsRejected = new Counter({
      name: 'llorch_handoff_files_rejected_total',
      help: 'Handoff files rejected, by reason.',
      labelNames: ['reason'],
      registers: [r],
    });
    this.healthChecks = new Counter({
      name: 'llorch_pool_engine_health_checks_total',
      help: 'Engine /health probes by result.',
      labelNames: ['pool_id', 'result'],
      registers: [r],
    });
    this.provisioningSeconds = new Histogram({
      name: 'llorch_pool_provisioning_duration_seconds',
      help: 'Time to provision engine binaries and models, and to start engines.',
      labelNames: ['pool_id', 'phase', 'outcome'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800],
      registers: [r],
    });
    this.dispatches = new Counter({
      name: 'llorch_dispatch_streams_total',
      help: 'Completion streams by outcome (end, error, canceled).',
      labelNames: ['pool_id', 'outcome'],
      registers: [r],
    });
    this.tokensOut = new Counter({
      name: 'llorch_dispatch_tokens_out_total',
      help: 'Tokens generated (engine count from end events).',
      labelNames: ['pool_id'],
      registers: [r],
    });
    this.promptTokens = new Counter({
      name: 'llorch_dispatch_prompt_tokens_total',
      help: 'Prompt tokens of finished streams, cached ones included (engine count).',
      labelNames: ['pool_id'],
      registers: [r],
    });
    // With the prompt total: the share of prompts the engines' prompt caches served.
    this.cachedPromptTokens = new Counter({
      name: 'llorch_dispatch_prompt_tokens_cached_total',
      help: 'Prompt tokens taken from the engine prompt cache.',
      labelNames: ['pool_id'],
      registers: [r],
    });
    this.reattach = new Counter({
      name: 'llorch_dispatch_reattach_total',
      help: 'Re-attachable dispatches by outcome: reattached (a GET took the stream over), expired (nobody re-attached within its window, or its held events passed the bound while detached), cancelled (DELETE).',
      labelNames: ['outcome'],
      registers: [r],
    });
    this.loads = new Counter({
      name: 'llorch_pool_loads_total',
      help: 'Pools loaded on request (POST /v2/pools) by outcome: ready (its engine served), failed (provisioning, memory or engine start; last_error says why), canceled (unloaded before either), refused (answered 409 or 503: no on_demand, id taken, max_pools, memory, shutting down).',
      labelNames: ['outcome'],
      registers: [r],
    });
    this.unloads = new Counter({
      name: 'llorch_pool_unloads_total',
      help: 'Pools loaded on request that were unloaded (DELETE /v2/pools/{id}) and left the node.',
      registers: [r],
    });
  }
}
