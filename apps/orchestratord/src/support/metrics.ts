import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/**
 * Prometheus series of orchestratord (names from the upstream metrics contract). Counters move only
 * on real events; gauges are computed at scrape time from live state, so scraping changes nothing.
 */
export interface OrchdMetrics {
  readonly tasksEnqueued: Counter<'engine' | 'priority'>;
  readonly tasksStarted: Counter<'engine' | 'engine_version' | 'pool_id' | 'priority'>;
  readonly tasksCanceled: Counter<'engine' | 'pool_id' | 'reason'>;
  readonly tasksRejected: Counter<'engine' | 'reason'>;
  readonly tasksFailed: Counter<'engine' | 'code'>;
  readonly tokensOut: Counter<'engine' | 'engine_version' | 'pool_id'>;
  readonly backpressureEvents: Counter<'engine' | 'policy'>;
  readonly placementDecisions: Counter<'outcome' | 'pinned' | 'fallback'>;
  /** Placements of tasks whose session had a last pool: `kept` there (its prompt cache), or `moved` (it had no free slot). */
  readonly sessionAffinity: Counter<'outcome'>;
  /** Idle sessions evicted before their TTL (the session cap). */
  readonly sessionsEvicted: Counter;
  readonly replacements: Counter<'reason'>;
  readonly nodeRegistrations: Counter<'outcome'>;
  readonly nodeHeartbeats: Counter<'outcome'>;
  readonly nodeDeregistrations: Counter<'outcome'>;
  readonly latencyFirstToken: Histogram<'engine' | 'engine_version' | 'pool_id' | 'priority'>;
  readonly latencyDecode: Histogram<'engine' | 'engine_version' | 'pool_id' | 'priority'>;
}

/** Live values read at scrape time. */
export interface MetricsSources {
  queueDepth(): Record<'interactive' | 'batch', number>;
  nodesOnline(): number;
  pools(): readonly { pool_id: string; node_id: string; leased: number; placeable: boolean; free: number }[];
}

export function createMetrics(registry: Registry, sources: MetricsSources): OrchdMetrics {
  const registers = [registry];
  new Gauge({
    name: 'queue_depth',
    help: 'Tasks waiting in the admission queue.',
    labelNames: ['engine', 'priority'] as const,
    registers,
    collect() {
      this.reset();
      const depth = sources.queueDepth();
      this.set({ engine: 'llamacpp', priority: 'interactive' }, depth.interactive);
      this.set({ engine: 'llamacpp', priority: 'batch' }, depth.batch);
    },
  });
  new Gauge({
    name: 'orchd_nodes_online',
    help: 'Nodes whose heartbeats are current.',
    registers,
    collect() {
      this.set(sources.nodesOnline());
    },
  });
  new Gauge({
    name: 'orchd_pools_available',
    help: 'Pools that can take a task now (ready, not draining, free slot, node online).',
    registers,
    collect() {
      this.set(sources.pools().filter((p) => p.placeable).length);
    },
  });
  new Gauge({
    name: 'active_leases',
    help: 'Slots leased by orchestratord per pool.',
    labelNames: ['pool_id', 'node_id'] as const,
    registers,
    collect() {
      this.reset();
      for (const p of sources.pools()) this.set({ pool_id: p.pool_id, node_id: p.node_id }, p.leased);
    },
  });
  return {
    sessionAffinity: new Counter({
      name: 'placement_session_affinity_total',
      help: 'Placements of tasks whose session ran before: kept on the session\'s last pool, or moved elsewhere (it was busy or gone).',
      labelNames: ['outcome'] as const,
      registers,
    }),
    tasksEnqueued: new Counter({ name: 'tasks_enqueued_total', help: 'Tasks admitted into the queue.', labelNames: ['engine', 'priority'] as const, registers }),
    tasksStarted: new Counter({
      name: 'tasks_started_total',
      help: 'Tasks whose dispatch a node accepted (stream opened).',
      labelNames: ['engine', 'engine_version', 'pool_id', 'priority'] as const,
      registers,
    }),
    tasksCanceled: new Counter({
      name: 'tasks_canceled_total',
      help: 'Tasks ended by cancel (client request or disconnect).',
      labelNames: ['engine', 'pool_id', 'reason'] as const,
      registers,
    }),
    tasksRejected: new Counter({ name: 'tasks_rejected_total', help: 'Tasks refused or evicted at admission, by error code.', labelNames: ['engine', 'reason'] as const, registers }),
    tasksFailed: new Counter({ name: 'tasks_failed_total', help: 'Admitted tasks that ended with an error frame, by code.', labelNames: ['engine', 'code'] as const, registers }),
    tokensOut: new Counter({
      name: 'tokens_out_total',
      help: 'Tokens generated: the sum of end.tokens_out of every ended task.',
      labelNames: ['engine', 'engine_version', 'pool_id'] as const,
      registers,
    }),
    backpressureEvents: new Counter({
      name: 'admission_backpressure_events_total',
      help: 'Full-queue events by policy.',
      labelNames: ['engine', 'policy'] as const,
      registers,
    }),
    placementDecisions: new Counter({
      name: 'placement_decisions_total',
      help: 'Placement outcomes (no_capacity counted once per task that had to wait).',
      labelNames: ['outcome', 'pinned', 'fallback'] as const,
      registers,
    }),
    sessionsEvicted: new Counter({ name: 'orchd_sessions_evicted_total', help: 'Idle sessions evicted before their TTL because ORCHD_SESSION_MAX were kept.', registers }),
    replacements: new Counter({ name: 'tasks_replaced_total', help: 'Tasks re-placed after a node failed before their first token.', labelNames: ['reason'] as const, registers }),
    nodeRegistrations: new Counter({ name: 'orchd_node_registrations_total', help: 'Node registrations.', labelNames: ['outcome'] as const, registers }),
    nodeHeartbeats: new Counter({ name: 'orchd_node_heartbeats_total', help: 'Node heartbeats.', labelNames: ['outcome'] as const, registers }),
    nodeDeregistrations: new Counter({ name: 'orchd_node_deregistrations_total', help: 'Node deregistrations.', labelNames: ['outcome'] as const, registers }),
    latencyFirstToken: new Histogram({
      name: 'latency_first_token_ms',
      help: 'Admission to first token, ms.',
      labelNames: ['engine', 'engine_version', 'pool_id', 'priority'] as const,
      buckets: [50, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 10000],
      registers,
    }),
    latencyDecode: new Histogram({
      name: 'latency_decode_ms',
      help: 'Engine decode time of ended tasks (end.decode_ms), ms.',
      labelNames: ['engine', 'engine_version', 'pool_id', 'priority'] as const,
      buckets: [250, 500, 1000, 1500, 2000, 3000, 4000, 6000, 8000, 12000],
      registers,
    }),
  };
}
