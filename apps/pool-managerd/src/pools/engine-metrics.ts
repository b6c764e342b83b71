import type { Logger } from 'pino';
import { parsePrometheusText } from '@llama-orch/daemon-support';
import type { LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import type { EngineSeries } from '../support/engine-series.js';
import type { PoolTable } from './pool-table.js';

export interface EngineMetricsScraperOptions {
  table: PoolTable;
  series: EngineSeries;
  /** The client of the engine at `url` (PoolManager.engineClient). */
  clientFor: (url: string) => Promise<LlamaServerClient>;
  /** The tick, ms: the node's heartbeat interval. */
  intervalMs: number;
  logger: Logger;
}

/**
 * Reads every bound engine's `/metrics` once per tick (the heartbeat interval) into
 * {@link EngineSeries}. pool-managerd is the engines' only scraper: llama-server resets its
 * windowed gauges (tokens/s) on every scrape, so a second reader would halve both windows.
 * A failed scrape (error, timeout, an engine without `--metrics`) drops that engine's series —
 * no stale numbers — and is logged at debug; so is a pool without a bound engine.
 */
export class EngineMetricsScraper {
  readonly #table: PoolTable;
  readonly #series: EngineSeries;
  readonly #clientFor: (url: string) => Promise<LlamaServerClient>;
  readonly #intervalMs: number;
  readonly #logger: Logger;
  readonly #stop = new AbortController();
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | undefined;

  constructor(options: EngineMetricsScraperOptions) {
    this.#table = options.table;
    this.#series = options.series;
    this.#clientFor = options.clientFor;
    this.#intervalMs = options.intervalMs;
    this.#logger = options.logger;
  }

  /** Scrapes at once, then every interval (a tick is skipped while the previous one still runs). */
  start(): void {
    if (this.#timer !== undefined || this.#stop.signal.aborted) return;
    void this.scrape();
    this.#timer = setInterval(() => void this.scrape(), this.#intervalMs);
    this.#timer.unref();
  }

  /** One pass over every pool, engines read concurrently; resolves when all are settled. */
  scrape(): Promise<void> {
    this.#inFlight ??= this.#pass().finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  close(): void {
    this.#stop.abort();
    clearInterval(this.#timer);
  }

  async #pass(): Promise<void> {
    const table = this.#table;
    const series = this.#series;
    const ids = table.ids();
    // Pools that left the table take their series with them.
    for (const poolId of series.pools()) if (!ids.includes(poolId)) series.drop(poolId);
    await Promise.all(ids.map((poolId) => this.#scrapePool(poolId)));
  }

  async #scrapePool(poolId: string): Promise<void> {
    const table = this.#table;
    const series = this.#series;
    const engine = table.engine(poolId);
    if (engine === undefined || this.#stop.signal.aborted) {
      series.drop(poolId);
      return;
    }
    const timeoutMs = Math.max(250, Math.min(this.#intervalMs, 5000));
    try {
      const client = await this.#clientFor(engine.url);
      const text = await client.metricsText(AbortSignal.any([this.#stop.signal, AbortSignal.timeout(timeoutMs)]));
      if (text === undefined) throw new Error('engine runs without --metrics (501)');
      // The engine was replaced or unbound meanwhile: what was read belongs to no current engine.
      const now = table.has(poolId) ? table.engine(poolId) : undefined;
      if (now?.url !== engine.url || now.replica_id !== engine.replica_id) {
        series.drop(poolId);
        return;
      }
      const { families, skipped } = parsePrometheusText(text);
      series.set(poolId, engine.replica_id, families);
      if (skipped > 0)
        this.#logger.debug(
          { pool_id: poolId, replica_id: engine.replica_id, skipped },
          'engine /metrics: unreadable lines skipped',
        );
    } catch (err) {
      series.drop(poolId);
      if (this.#stop.signal.aborted) return;
      this.#logger.debug(
        {
          pool_id: poolId,
          replica_id: engine.replica_id,
          engine_url: engine.url,
          err: err instanceof Error ? { message: err.message } : err,
        },
        'engine /metrics scrape failed; its series dropped',
      );
    }
  }
}
