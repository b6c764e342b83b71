import { Writable } from 'node:stream';
import pino from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import { EngineSeries } from '../support/engine-series.js';
import { EngineMetricsScraper } from './engine-metrics.js';
import { PoolTable } from './pool-table.js';

const TEXT = (n: number) =>
  `# HELP llamacpp:requests_processing Number of requests processing\n# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing ${n}\n`;

/** Engines by URL: the text they answer, or an error to throw. */
type Answer = string | undefined | Error | (() => Promise<string>);

function setup(answers: Record<string, Answer>) {
  const logs: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _e, cb) {
        logs.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
        cb();
      },
    }),
  );
  const table = new PoolTable();
  const registry = new Registry();
  const series = new EngineSeries(registry);
  const asked: string[] = [];
  const clientFor = async (url: string) =>
    ({
      metricsText: async () => {
        asked.push(url);
        const a = answers[url];
        if (a instanceof Error) throw a;
        return typeof a === 'function' ? a() : a;
      },
    }) as unknown as LlamaServerClient;
  const scraper = new EngineMetricsScraper({ table, series, clientFor, intervalMs: 60_000, logger });
  const bind = (poolId: string, url: string, replica = 'r0') => {
    if (!table.has(poolId))
      table.register(poolId, { managed: true, models: ['m'], deterministic: false, ctx: 512, slotsTotal: 1 });
    table.bindEngine(poolId, {
      url,
      replica_id: replica,
      engine_version: 'b1',
      slots_total: 1,
      ctx: 512,
      mode: 'managed',
    });
  };
  return { logs, table, registry, series, scraper, asked, bind };
}

describe('EngineMetricsScraper', () => {
  it('reads every bound engine into llorch_engine_* with pool_id and replica_id; unbound pools are not asked', async () => {
    const s = setup({ 'http://a': TEXT(1), 'http://b': TEXT(2) });
    s.bind('pa', 'http://a');
    s.bind('pb', 'http://b', 'r3');
    s.table.register('idle', { managed: true, models: ['m'], deterministic: false, ctx: 512, slotsTotal: 1 });
    await s.scraper.scrape();
    const text = await s.registry.metrics();
    expect(text).toContain('llorch_engine_requests_processing{pool_id="pa",replica_id="r0"} 1');
    expect(text).toContain('llorch_engine_requests_processing{pool_id="pb",replica_id="r3"} 2');
    expect(s.asked.sort()).toEqual(['http://a', 'http://b']);
  });

  it("a failed scrape drops that engine's series (no stale numbers) and logs at debug; the others stay", async () => {
    const answers: Record<string, Answer> = { 'http://a': TEXT(1), 'http://b': TEXT(2) };
    const s = setup(answers);
    s.bind('pa', 'http://a');
    s.bind('pb', 'http://b');
    await s.scraper.scrape();
    answers['http://a'] = new Error('connect ECONNREFUSED');
    answers['http://b'] = TEXT(5);
    await s.scraper.scrape();
    let text = await s.registry.metrics();
    expect(text).not.toContain('pool_id="pa"');
    expect(text).toContain('llorch_engine_requests_processing{pool_id="pb",replica_id="r0"} 5');
    const failed = s.logs.filter((l) => l.msg === 'engine /metrics scrape failed; its series dropped');
    expect(failed).toEqual([
      expect.objectContaining({
        level: 20,
        pool_id: 'pa',
        replica_id: 'r0',
        err: expect.objectContaining({ message: 'connect ECONNREFUSED' }),
      }),
    ]);
    // Without --metrics (501) counts as failed too; an unbound engine's series go at the next tick.
    answers['http://a'] = undefined;
    s.table.unbindEngine('pb');
    await s.scraper.scrape();
    text = await s.registry.metrics();
    expect(text).not.toContain('llorch_engine_');
    expect(s.logs.at(-1)).toMatchObject({
      level: 20,
      pool_id: 'pa',
      err: { message: 'engine runs without --metrics (501)' },
    });
  });

  it('an engine replaced while its scrape was in flight: what was read is not exported', async () => {
    let release!: (t: string) => void;
    const s = setup({
      'http://old': () =>
        new Promise<string>((r) => {
          release = r;
        }),
      'http://new': TEXT(9),
    });
    s.bind('p', 'http://old');
    const pass = s.scraper.scrape();
    await new Promise((r) => setTimeout(r, 10));
    // Concurrent calls share the pass in flight.
    expect(s.scraper.scrape()).toBe(pass);
    s.bind('p', 'http://new', 'r1');
    release(TEXT(1));
    await pass;
    expect(await s.registry.metrics()).not.toContain('llorch_engine_');
    await s.scraper.scrape();
    expect(await s.registry.metrics()).toContain('llorch_engine_requests_processing{pool_id="p",replica_id="r1"} 9');
  });

  it('start() scrapes at once and on every tick; close() stops it', async () => {
    const s = setup({ 'http://a': TEXT(1) });
    s.bind('pa', 'http://a');
    const scraper = new EngineMetricsScraper({
      table: s.table,
      series: s.series,
      clientFor: async () =>
        ({
          metricsText: async () => {
            s.asked.push('tick');
            return TEXT(1);
          },
        }) as unknown as LlamaServerClient,
      intervalMs: 30,
      logger: pino({ level: 'silent' }),
    });
    scraper.start();
    await new Promise((r) => setTimeout(r, 100));
    scraper.close();
    const n = s.asked.length;
    expect(n).toBeGreaterThanOrEqual(2);
    await new Promise((r) => setTimeout(r, 80));
    expect(s.asked.length).toBe(n);
  });
});
