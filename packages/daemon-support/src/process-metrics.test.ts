import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { DROPPED_STANDARD_GAUGES, registerProcessMetrics } from './process-metrics.js';
import { findPromtool, promtoolCheckMetrics } from './testing/promtool.js';

const promtool = await findPromtool();
const skipReason = 'unavailable' in promtool ? ` (SKIPPED: ${promtool.unavailable})` : '';

describe('registerProcessMetrics', () => {
  it('exports the standard series without the gauges prom-client names _total', async () => {
    const registry = new Registry();
    registerProcessMetrics(registry);
    const names = registry.getMetricsAsArray().map((m) => m.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'process_cpu_user_seconds_total',
        'nodejs_active_handles',
        'nodejs_active_requests',
        'nodejs_active_resources',
      ]),
    );
    for (const dropped of DROPPED_STANDARD_GAUGES) expect(names).not.toContain(dropped);
    expect(await registry.metrics()).not.toMatch(/^nodejs_\w+_total /m);
  });

  it.skipIf('unavailable' in promtool)(`passes promtool check metrics${skipReason}`, async () => {
    const registry = new Registry();
    registerProcessMetrics(registry);
    const result = await promtoolCheckMetrics((promtool as { path: string }).path, await registry.metrics());
    expect(result).toEqual({ code: 0, output: '' });
  });
});
