// Every series pool-managerd exports, listed from a real scrape after one generation on a real
// llama-server pool, checked against the naming rules (prometheus.io conventions; README "Metrics").
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  findPromtool,
  metricNamingProblems,
  parsePrometheusText,
  promtoolCheckMetrics,
  type PromFamily,
} from '@llama-orch/daemon-support';
import { collect, dispatch, startHarness, waitReady, type Harness } from '../testing/harness.js';

// Prometheus' own linter over the same scrape (found on PATH or fetched from Debian; the test says why when it skips).
const promtool = await findPromtool();
const skipReason = 'unavailable' in promtool ? ` (SKIPPED: ${promtool.unavailable})` : '';

/** pool-managerd's own families: a new one is added here (and to the README's list). */
const OURS = [
  'llorch_dispatch_prompt_tokens_cached_total',
  'llorch_dispatch_prompt_tokens_total',
  'llorch_dispatch_reattach_total',
  'llorch_dispatch_streams_total',
  'llorch_dispatch_tokens_out_total',
  'llorch_handoff_files_processed_total',
  'llorch_handoff_files_rejected_total',
  'llorch_pool_active_leases',
  'llorch_pool_breaker_state',
  'llorch_pool_decode_tokens_per_second',
  'llorch_pool_engine_health_checks_total',
  'llorch_pool_engine_restarts_total',
  'llorch_pool_loads_total',
  'llorch_pool_provisioning_duration_seconds',
  'llorch_pool_ready',
  'llorch_pool_slots',
  'llorch_pool_slots_free',
  'llorch_pool_unloads_total',
];

/** What llama-server reports (reference §4.7), under our names. */
const ENGINE = [
  'llorch_engine_n_decode_total',
  'llorch_engine_predicted_tokens_per_second',
  'llorch_engine_prompt_seconds_total',
  'llorch_engine_prompt_tokens_cached_total',
  'llorch_engine_prompt_tokens_per_second',
  'llorch_engine_prompt_tokens_total',
  'llorch_engine_requests_deferred',
  'llorch_engine_requests_processing',
  'llorch_engine_tokens_predicted_seconds_total',
  'llorch_engine_tokens_predicted_total',
];

let h: Harness;
let families: PromFamily[] = [];
let text = '';
let taskId = '';

beforeAll(async () => {
  h = await startHarness({ pools: [{ id: 'gen', model: 'synthetic:llama', ctx: 1024, threads: 1 }] });
  await waitReady(h, 'gen');
  taskId = crypto.randomUUID();
  const d = await dispatch(h, 'gen', { task_id: taskId, prompt: 'Once upon a time', max_tokens: 8, seed: 1 });
  expect(d.status).toBe(200);
  expect((await collect(d.events)).at(-1)?.type).toBe('end');
  // The heartbeat tick's scrape, taken now rather than waited for.
  await h.manager.engineMetrics.scrape();
  text = await (await request(`${h.url}/metrics`)).body.text();
  families = parsePrometheusText(text).families;
}, 10 * 60_000);

afterAll(async () => {
  await h?.close();
});

describe('pool-managerd /metrics names', () => {
  it("lists every exported family: ours, the engine's under llorch_engine_, the standard process and Node.js series", () => {
    const names = families.map((f) => f.name).sort();
    expect(names.filter((n) => n.startsWith('llorch_') && !n.startsWith('llorch_engine_'))).toEqual(OURS);
    expect(names.filter((n) => n.startsWith('llorch_engine_'))).toEqual(expect.arrayContaining(ENGINE));
    expect(
      names.filter((n) => !n.startsWith('llorch_') && !n.startsWith('process_') && !n.startsWith('nodejs_')),
    ).toEqual([]);
    for (const std of [
      'process_cpu_user_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
    ])
      expect(names, std).toContain(std);
  });

  it('follows the naming rules, engine series included (each with pool_id and replica_id)', () => {
    expect(
      metricNamingProblems(families, {
        requiredLabels: { prefix: 'llorch_engine_', labels: ['pool_id', 'replica_id'] },
      }),
    ).toEqual([]);
    expect(text).not.toContain(taskId);
    expect(text).not.toMatch(/^llamacpp:/m); // (named in HELP only)
  });

  it('the generation shows in the engine series of its pool', () => {
    const predicted = families.find((f) => f.name === 'llorch_engine_tokens_predicted_total');
    expect(predicted?.type).toBe('counter');
    expect(predicted?.samples).toEqual([
      {
        name: 'llorch_engine_tokens_predicted_total',
        labels: { pool_id: 'gen', replica_id: 'r0' },
        value: expect.any(Number),
      },
    ]);
    expect(predicted?.samples[0]?.value).toBeGreaterThanOrEqual(8);
    expect(families.find((f) => f.name === 'llorch_engine_requests_processing')?.samples[0]).toMatchObject({
      labels: { pool_id: 'gen', replica_id: 'r0' },
      value: 0,
    });
  });

  it.skipIf('unavailable' in promtool)(`passes promtool check metrics${skipReason}`, async () => {
    expect(await promtoolCheckMetrics((promtool as { path: string }).path, text)).toEqual({ code: 0, output: '' });
  });
});
