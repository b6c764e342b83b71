import type { DashboardTask } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';
import { weightedMedian } from './activity-store.js';

const row = (id: string, endedAt = 1_700_000_000_000): DashboardTask => ({
  task_id: id,
  correlation_id: `c-${id}`,
  model: 'm',
  priority: 'interactive',
  node_id: 'n1',
  pool_id: 'p',
  tokens_out: 5,
  ttft_ms: 12.5,
  duration_ms: 40,
  outcome: 'ok',
  ended_at_ms: endedAt,
});
const W = 1000;
const T0 = 1_700_000_000_000;

describe.each(STORE_KINDS)('dashboard activity (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('recent tasks: every replica sees every replica’s rows, newest first, capped at keep', async () => {
    const [a, b, c] = await h.open(3);
    await a!.activity.recordTasks([row('a1'), row('a2')], 5);
    await b!.activity.recordTasks([row('b1')], 5);
    expect((await c!.activity.recentTasks(10)).map((r) => r.task_id)).toEqual(['b1', 'a2', 'a1']);
    expect(await c!.activity.recentTasks(10)).toContainEqual(row('a1'));
    await c!.activity.recordTasks([row('c1'), row('c2'), row('c3')], 5);
    expect((await a!.activity.recentTasks(10)).map((r) => r.task_id)).toEqual(['c3', 'c2', 'c1', 'b1', 'a2']);
    expect((await a!.activity.recentTasks(2)).map((r) => r.task_id)).toEqual(['c3', 'c2']);
    // concurrent writers never leave more than keep
    await Promise.all(Array.from({ length: 30 }, (_, i) => [a, b, c][i % 3]!.activity.recordTasks([row(`x${i}`)], 5)));
    expect(await b!.activity.recentTasks(100)).toHaveLength(5);
  });

  it('throughput: contributions of several replicas add up per bucket; the first-token median is weighted by count', async () => {
    const [a, b] = await h.open(2);
    await a!.activity.addThroughput(
      'r-a',
      W,
      [
        { t_ms: T0, tokens: 100, tasks_ended: 2, ttft_p50_ms: 10, ttft_count: 3 },
        { t_ms: T0 + W, tokens: 10, tasks_ended: 0, ttft_count: 0 },
      ],
      60_000,
    );
    await b!.activity.addThroughput(
      'r-b',
      W,
      [{ t_ms: T0, tokens: 50, tasks_ended: 1, ttft_p50_ms: 30, ttft_count: 1 }],
      60_000,
    );
    // a bucket nobody wrote is absent; the range is [from, to)
    const points = await a!.activity.throughput(W, T0 - W, T0 + 3 * W);
    expect(points).toEqual([
      { t_ms: T0, tokens_per_s: 150, tasks_ended: 3, ttft_p50_ms: 10 },
      { t_ms: T0 + W, tokens_per_s: 10, tasks_ended: 0 },
    ]);
    expect(await b!.activity.throughput(W, T0, T0 + W)).toEqual([points[0]]);
    // another width is another series
    expect(await b!.activity.throughput(2 * W, T0, T0 + 4 * W)).toEqual([]);
    // the same replica writing a bucket twice adds its tokens and replaces its median
    await a!.activity.addThroughput(
      'r-a',
      W,
      [{ t_ms: T0, tokens: 1, tasks_ended: 0, ttft_p50_ms: 40, ttft_count: 9 }],
      60_000,
    );
    expect((await b!.activity.throughput(W, T0, T0 + W))[0]).toEqual({
      t_ms: T0,
      tokens_per_s: 151,
      tasks_ended: 3,
      ttft_p50_ms: 40,
    });
  });

  it('throughput buckets expire retainMs after their last write', async () => {
    const [a] = await h.open(1);
    await a!.activity.addThroughput('r-a', W, [{ t_ms: T0, tokens: 5, tasks_ended: 1, ttft_count: 0 }], 150);
    expect(await a!.activity.throughput(W, T0, T0 + W)).toHaveLength(1);
    await sleep(250);
    expect(await a!.activity.throughput(W, T0, T0 + W)).toEqual([]);
  });
});

describe('weightedMedian', () => {
  it('is the plain value for one share and the count-weighted median for several', () => {
    expect(weightedMedian([])).toBeUndefined();
    expect(weightedMedian([{ p50: 7, count: 0 }])).toBeUndefined();
    expect(weightedMedian([{ p50: 7, count: 3 }])).toBe(7);
    expect(
      weightedMedian([
        { p50: 50, count: 1 },
        { p50: 10, count: 5 },
        { p50: 20, count: 1 },
      ]),
    ).toBe(10);
    expect(
      weightedMedian([
        { p50: 50, count: 4 },
        { p50: 10, count: 1 },
      ]),
    ).toBe(50);
  });
});
