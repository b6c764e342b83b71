import type { Metric, Registry } from 'prom-client';
import type { PromFamily, PromType } from '@llama-orch/daemon-support';

/** Every engine family is exported under this prefix, with `pool_id` and `replica_id` labels. */
export const ENGINE_PREFIX = 'llorch_engine_';

/**
 * llama-server names whose generic translation would break the conventions: its `*_tokens_seconds`
 * gauges are rates (tokens per second, not seconds), and `n_tokens_max` is declared a counter but
 * is the largest sequence seen (a gauge, without `_total`).
 */
const RENAMES: Readonly<Record<string, { name: string; type?: PromType }>> = {
  'llamacpp:prompt_tokens_seconds': { name: 'llorch_engine_prompt_tokens_per_second' },
  'llamacpp:predicted_tokens_seconds': { name: 'llorch_engine_predicted_tokens_per_second' },
  'llamacpp:n_tokens_max': { name: 'llorch_engine_n_tokens_max', type: 'gauge' },
  'llamacpp:n_busy_slots_per_decode': { name: 'llorch_engine_busy_slots_per_decode' },
};

/**
 * Our name and type for an engine family: `llamacpp:x` → `llorch_engine_x` (namespace dropped,
 * characters outside `[a-zA-Z0-9_]` → `_`), `_total` added to counters and removed from anything
 * else, untyped families ending in `_total` read as counters and other untyped ones as gauges.
 */
export function engineMetricName(source: string, type: PromType): { name: string; type: PromType } {
  const fixed = RENAMES[source];
  if (fixed !== undefined) return { name: fixed.name, type: fixed.type ?? type };
  const bare = source.replace(/^[a-zA-Z_][a-zA-Z0-9_]*:/, '').replace(/[^a-zA-Z0-9_]/g, '_');
  let name = `${ENGINE_PREFIX}${bare}`;
  const t: PromType = type === 'untyped' ? (name.endsWith('_total') ? 'counter' : 'gauge') : type;
  if (t === 'counter' && !name.endsWith('_total')) name += '_total';
  if (t !== 'counter' && name.endsWith('_total')) name = name.slice(0, -'_total'.length);
  return { name, type: t };
}

interface Sample {
  metricName: string;
  labels: Record<string, string>;
  value: number;
}

interface Exported {
  type: PromType;
  help: string;
  samples: Sample[];
}

/** The labels of an engine sample, ours added; an engine label with one of our names is kept as `exported_<name>` (Prometheus' own convention). */
function labelsOf(engine: Readonly<Record<string, string>>, poolId: string, replicaId: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(engine)) out[k === 'pool_id' || k === 'replica_id' ? `exported_${k}` : k] = v;
  out.pool_id = poolId;
  out.replica_id = replicaId;
  return out;
}

/** Translates one engine's scrape into our families (by exported name). */
export function translateEngineFamilies(
  families: readonly PromFamily[],
  poolId: string,
  replicaId: string,
): Map<string, Exported> {
  const out = new Map<string, Exported>();
  for (const f of families) {
    if (f.samples.length === 0) continue;
    const { name, type } = engineMetricName(f.name, f.type);
    if (out.has(name)) continue; // two engine names that translate alike: the first one wins
    out.set(name, {
      type,
      help: `${f.help === '' ? f.name : f.help} (engine metric ${f.name})`,
      samples: f.samples.map((s) => ({
        // Histogram and summary samples keep their suffix (`_bucket`, `_sum`, `_count`).
        metricName: type === 'histogram' || type === 'summary' ? name + s.name.slice(f.name.length) : name,
        labels: labelsOf(s.labels, poolId, replicaId),
        value: s.value,
      })),
    });
  }
  return out;
}

/**
 * The engines' own metrics (llama-server `/metrics`, read by the scraper on the heartbeat tick)
 * in pool-managerd's registry as `llorch_engine_*{pool_id, replica_id}`. Each engine's last
 * successful scrape is kept until the next one; {@link drop} removes it (failed scrape, engine
 * gone), so a family no engine reports disappears from `/metrics` instead of showing old numbers.
 */
export class EngineSeries {
  readonly #registry: Registry;
  /** Per engine (`pool_id`, `replica_id`): its families by exported name. */
  readonly #engines = new Map<string, { poolId: string; families: Map<string, Exported> }>();
  /** Families registered in the registry now. */
  readonly #registered = new Set<string>();

  constructor(registry: Registry) {
    this.#registry = registry;
  }

  /** Replaces what the engine of `poolId`/`replicaId` reported with one scrape's families. */
  set(poolId: string, replicaId: string, families: readonly PromFamily[]): void {
    // One engine per pool today: a new replica id replaces the pool's old series.
    this.drop(poolId);
    this.#engines.set(`${poolId}\u0000${replicaId}`, {
      poolId,
      families: translateEngineFamilies(families, poolId, replicaId),
    });
    this.#sync();
  }

  /** Drops every series of pool `poolId`'s engines. */
  drop(poolId: string): void {
    for (const [key, e] of this.#engines) if (e.poolId === poolId) this.#engines.delete(key);
    this.#sync();
  }

  /** Pools with series now. */
  pools(): string[] {
    return [...new Set([...this.#engines.values()].map((e) => e.poolId))];
  }

  /** Registers families that appeared, removes those no engine reports any more. */
  #sync(): void {
    const wanted = new Set<string>();
    for (const e of this.#engines.values()) for (const name of e.families.keys()) wanted.add(name);
    for (const name of this.#registered) {
      if (wanted.has(name)) continue;
      this.#registry.removeSingleMetric(name);
      this.#registered.delete(name);
    }
    for (const name of wanted) {
      if (this.#registered.has(name) || this.#registry.getSingleMetric(name) !== undefined) continue;
      this.#registry.registerMetric(this.#collector(name));
      this.#registered.add(name);
    }
  }

  /**
   * A family read from the engines' latest scrapes whenever the registry is scraped. prom-client
   * renders any object with a name, type and `get()`; its Metric type lists only its own classes.
   */
  #collector(name: string): Metric {
    const engines = this.#engines;
    const first = (): Exported | undefined => {
      for (const e of engines.values()) {
        const f = e.families.get(name);
        if (f !== undefined) return f;
      }
      return undefined;
    };
    const collector = {
      name,
      get help() {
        return first()?.help ?? name;
      },
      get type() {
        return first()?.type ?? 'gauge';
      },
      aggregator: 'sum',
      labelNames: [],
      get: () => {
        const f = first();
        const values = [...engines.values()].flatMap((e) => {
          const mine = e.families.get(name);
          // An engine whose family has another type than the first one's is left out (a mixed family is invalid).
          return mine === undefined || mine.type !== f?.type ? [] : mine.samples;
        });
        return { name, help: f?.help ?? name, type: f?.type ?? 'gauge', aggregator: 'sum', values };
      },
      reset: () => undefined,
    };
    // Unavoidable: prom-client's Metric type is the union of its own classes; its registry renders any collector with a name, a type and get().
    return collector as unknown as Metric;
  }
}
