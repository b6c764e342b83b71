import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { registerProcessMetrics } from '@llama-orch/daemon-support';
import { ClusterGauge } from './cluster-gauge.js';

/**
 * Prometheus series of orchestratord, named by the prometheus.io conventions: one `llorch_` prefix,
 * base units (seconds), `_total` on counters only, no per-task labels (README "Metrics" lists the
 * renames). Counters move only on real events; gauges are computed at scrape time from live state,
 * so scraping changes nothing. The process and Node.js runtime series keep their standard names.
 */
export interface OrchdMetrics {
  readonly tasksEnqueued: Counter<'engine' | 'priority'>;
  readonly tasksStarted: Counter<'engine' | 'engine_version' | 'pool_id' | 'priority'>;
  readonly tasksCanceled: Counter<'engine' | 'pool_id' | 'reason'>;
  readonly tasksRejected: Counter<'engine' | 'reason'>;
  readonly tasksFailed: Counter<'engine' | 'code'>;
  readonly tokensOut: Counter<'engine' | 'engine_version' | 'pool_id'>;
  /** Tokens generated per client key name (bounded: the keys file's names, `default`). */
  readonly clientTokensOut: Counter<'key'>;
  readonly backpressureEvents: Counter<'engine' | 'policy'>;
  readonly placementDecisions: Counter<'outcome' | 'pinned' | 'fallback'>;
  /** Placements by what chose the pool (pinned, preferred, fallback, affinity, prefix, load-guard, strategy). */
  readonly placementReasons: Counter<'reason'>;
  /** Prompt tokens the prefix index expected a pool's cache to serve, per pool (cache-aware placement). */
  readonly prefixPredictedTokens: Counter<'pool_id'>;
  /** Prompt tokens the engine served from its cache, of the same tasks. */
  readonly prefixCachedTokens: Counter<'pool_id'>;
  /** Each answer against the index's prediction: `hit`, `miss` (expected more than was cached), `none` (neither), `unforeseen` (cached, none expected). */
  readonly prefixPredictions: Counter<'pool_id' | 'outcome'>;
  /** Placements of tasks whose session had a last pool: `kept` there (its prompt cache), or `moved` (it had no free slot). */
  readonly sessionAffinity: Counter<'outcome'>;
  /** Idle sessions evicted before their TTL (the session cap). */
  readonly sessionsEvicted: Counter;
  readonly replacements: Counter<'reason'>;
  readonly nodeRegistrations: Counter<'outcome'>;
  readonly nodeHeartbeats: Counter<'outcome'>;
  readonly nodeDeregistrations: Counter<'outcome'>;
  /** Admission → first token, observed in seconds. */
  readonly firstTokenSeconds: Histogram<'engine' | 'engine_version' | 'pool_id' | 'priority'>;
  /** Engine decode time (`end.decode_ms`), observed in seconds. */
  readonly decodeSeconds: Histogram<'engine' | 'engine_version' | 'pool_id' | 'priority'>;
}

/** Live values read at scrape time. */
export interface MetricsSources {
  queueDepth(): Record<'interactive' | 'batch', number>;
  nodesOnline(): number;
  pools(): readonly { pool_id: string; node_id: string; leased: number; placeable: boolean; free: number }[];
  /**
   * Whether this replica exports the cluster gauges: the lowest live replica id of the cluster
   * store (always true in-process). Replicas of one cluster see the same nodes and pools, so the
   * others leave those gauges empty and `sum()` over every replica does not count them N times.
   */
  clusterLeader(): boolean;
}

export function createMetrics(registry: Registry, sources: MetricsSources): OrchdMetrics {
  const registers = [registry];
  registerProcessMetrics(registry);
  const leader = (): boolean => sources.clusterLeader();
  new Gauge({
    name: 'llorch_cluster_leader',
    help: 'Whether this replica exports the cluster gauges (1: the lowest live replica id; 0: another replica does).',
    registers,
    collect() {
      this.set(leader() ? 1 : 0);
    },
  });
  // Per replica: the waiting tasks this replica admitted (with a Redis store, its share of the
  // cluster's queue), so the sum over replicas is the cluster's depth.
  new Gauge({
    name: 'llorch_queue_depth',
    help: 'Tasks waiting in the admission queue that this replica admitted.',
    labelNames: ['engine', 'priority'] as const,
    registers,
    collect() {
      this.reset();
      const depth = sources.queueDepth();
      this.set({ engine: 'llamacpp', priority: 'interactive' }, depth.interactive);
      this.set({ engine: 'llamacpp', priority: 'batch' }, depth.batch);
    },
  });
  new ClusterGauge({
    name: 'llorch_nodes_online',
    help: 'Nodes whose heartbeats are current (cluster-wide; exported by the leader replica only).',
    registers,
    exports: leader,
    collect() {
      this.set(sources.nodesOnline());
    },
  });
  new ClusterGauge({
    name: 'llorch_pools_available',
    help: 'Pools that can take a task now (ready, not draining, free slot, node online; cluster-wide, exported by the leader replica only).',
    registers,
    exports: leader,
    collect() {
      this.set(sources.pools().filter((p) => p.placeable).length);
    },
  });
  new Gauge({
    name: 'llorch_active_leases',
    help: "Slots leased by this orchestratord replica per pool (each replica its own leases: the sum over replicas is the cluster's).",
    labelNames: ['pool_id', 'node_id'] as const,
    registers,
    collect() {
      this.reset();
      for (const p of sources.pools()) this.set({ pool_id: p.pool_id, node_id: p.node_id }, p.leased);
    },
  });
  const metrics = {
    sessionAffinity: new Counter({
      name: 'llorch_placement_session_affinity_total',
      help: "Placements of tasks whose session ran before: kept on the session's last pool, or moved elsewhere (it was busy or gone).",
      labelNames: ['outcome'] as const,
      registers,
    }),
    tasksEnqueued: new Counter({
      name: 'llorch_tasks_enqueued_total',
      help: 'Tasks admitted into the queue.',
      labelNames: ['engine', 'priority'] as const,
      registers,
    }),
    tasksStarted: new Counter({
      name: 'llorch_tasks_started_total',
      help: 'Tasks whose dispatch a node accepted (stream opened).',
      labelNames: ['engine', 'engine_version', 'pool_id', 'priority'] as const,
      registers,
    }),
    tasksCanceled: new Counter({
      name: 'llorch_tasks_canceled_total',
      help: 'Tasks ended by cancel (client request or disconnect).',
      labelNames: ['engine', 'pool_id', 'reason'] as const,
      registers,
    }),
    tasksRejected: new Counter({
      name: 'llorch_tasks_rejected_total',
      help: 'Tasks refused or evicted at admission, by error code.',
      labelNames: ['engine', 'reason'] as const,
      registers,
    }),
    tasksFailed: new Counter({
      name: 'llorch_tasks_failed_total',
      help: 'Admitted tasks that ended with an error frame, by code.',
      labelNames: ['engine', 'code'] as const,
      registers,
    }),
    tokensOut: new Counter({
      name: 'llorch_tokens_out_total',
      help: 'Tokens generated: the sum of end.tokens_out of every ended task.',
      labelNames: ['engine', 'engine_version', 'pool_id'] as const,
      registers,
    }),
    clientTokensOut: new Counter({
      name: 'llorch_client_tokens_out_total',
      help: 'Tokens generated for each client key (end.tokens_out of its ended tasks), by key name.',
      labelNames: ['key'] as const,
      registers,
    }),
    backpressureEvents: new Counter({
      name: 'llorch_admission_backpressure_events_total',
      help: 'Full-queue events by policy.',
      labelNames: ['engine', 'policy'] as const,
      registers,
    }),
    placementDecisions: new Counter({
      name: 'llorch_placement_decisions_total',
      help: 'Placement outcomes (no_capacity counted once per task that had to wait).',
      labelNames: ['outcome', 'pinned', 'fallback'] as const,
      registers,
    }),
    placementReasons: new Counter({
      name: 'llorch_placement_reason_total',
      help: 'Placements by what chose the pool: pinned, preferred, fallback, affinity, prefix (its cache holds the longest prefix), load-guard (the prefix holder was too busy), strategy.',
      labelNames: ['reason'] as const,
      registers,
    }),
    prefixPredictedTokens: new Counter({
      name: 'llorch_prefix_cache_predicted_tokens_total',
      help: "Prompt tokens the prefix index expected the pool's prompt cache to serve (cache-aware placement).",
      labelNames: ['pool_id'] as const,
      registers,
    }),
    prefixCachedTokens: new Counter({
      name: 'llorch_prefix_cache_actual_tokens_total',
      help: "Prompt tokens the pool's engine served from its cache (timings.cache_n), of the tasks the index predicted for.",
      labelNames: ['pool_id'] as const,
      registers,
    }),
    prefixPredictions: new Counter({
      name: 'llorch_prefix_cache_predictions_total',
      help: 'Answers against the prefix index: hit, miss (it expected more than the engine had cached), none, unforeseen (cached without a prediction).',
      labelNames: ['pool_id', 'outcome'] as const,
      registers,
    }),
    sessionsEvicted: new Counter({
      name: 'llorch_sessions_evicted_total',
      help: 'Idle sessions evicted before their TTL because ORCHD_SESSION_MAX were kept.',
      registers,
    }),
    replacements: new Counter({
      name: 'llorch_tasks_replaced_total',
      help: 'Tasks re-placed after a node failed before their first token.',
      labelNames: ['reason'] as const,
      registers,
    }),
    nodeRegistrations: new Counter({
      name: 'llorch_node_registrations_total',
      help: 'Node registrations.',
      labelNames: ['outcome'] as const,
      registers,
    }),
    nodeHeartbeats: new Counter({
      name: 'llorch_node_heartbeats_total',
      help: 'Node heartbeats.',
      labelNames: ['outcome'] as const,
      registers,
    }),
    nodeDeregistrations: new Counter({
      name: 'llorch_node_deregistrations_total',
      help: 'Node deregistrations.',
      labelNames: ['outcome'] as const,
      registers,
    }),
    firstTokenSeconds: new Histogram({
      name: 'llorch_task_first_token_seconds',
      help: 'Admission to first token, seconds.',
      labelNames: ['engine', 'engine_version', 'pool_id', 'priority'] as const,
      buckets: [0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10],
      // a traced task's observation keeps its trace id (an exemplar, shown when scraped as
      // OpenMetrics); registered below (prom-client refuses exemplars at construction in a Prometheus-format registry)
      enableExemplars: true,
      registers: [],
    }),
    decodeSeconds: new Histogram({
      name: 'llorch_task_decode_seconds',
      help: 'Engine decode time of ended tasks (end.decode_ms), seconds.',
      labelNames: ['engine', 'engine_version', 'pool_id', 'priority'] as const,
      buckets: [0.25, 0.5, 1, 1.5, 2, 3, 4, 6, 8, 12],
      enableExemplars: true,
      registers: [],
    }),
  };
  registry.registerMetric(metrics.firstTokenSeconds);
  registry.registerMetric(metrics.decodeSeconds);
  return metrics;
}
