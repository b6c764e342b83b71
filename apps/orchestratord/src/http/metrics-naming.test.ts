// Every series orchestratord exports, listed from a real scrape after some traffic (fixture node
// over loopback), checked against the naming rules (prometheus.io conventions; README "Metrics").
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  findPromtool,
  metricNamingProblems,
  parsePrometheusText,
  promtoolCheckMetrics,
  type PromFamily,
} from '@llama-orch/daemon-support';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { HB_MS } from '../testing/openai-cluster.js';
import { makeApp, openSse, taskBody, TOKEN, type TestApp } from '../testing/test-helpers.js';

// Prometheus' own linter over the same scrape (found on PATH or fetched from Debian; the test says why when it skips).
const promtool = await findPromtool();
const skipReason = 'unavailable' in promtool ? ` (SKIPPED: ${promtool.unavailable})` : '';

/** orchestratord's own families: a new one is added here (and to the README's list). */
const OURS = [
  'llorch_active_leases',
  'llorch_admission_backpressure_events_total',
  'llorch_client_requests_total',
  'llorch_client_tokens_out_total',
  'llorch_cluster_leader',
  'llorch_node_deregistrations_total',
  'llorch_node_heartbeats_total',
  'llorch_node_registrations_total',
  'llorch_nodes_online',
  'llorch_placement_decisions_total',
  'llorch_placement_reason_total',
  'llorch_placement_session_affinity_total',
  'llorch_pools_available',
  'llorch_prefix_cache_actual_tokens_total',
  'llorch_prefix_cache_predicted_tokens_total',
  'llorch_prefix_cache_predictions_total',
  'llorch_queue_depth',
  'llorch_sessions_evicted_total',
  'llorch_task_decode_seconds',
  'llorch_task_first_token_seconds',
  'llorch_tasks_canceled_total',
  'llorch_tasks_enqueued_total',
  'llorch_tasks_failed_total',
  'llorch_tasks_rejected_total',
  'llorch_tasks_replaced_total',
  'llorch_tasks_started_total',
  'llorch_tokens_out_total',
];

let t: TestApp;
let node: FixturePoolManager;
let url = '';
const taskIds: string[] = [];
let families: PromFamily[] = [];
let text = '';

beforeAll(async () => {
  t = await makeApp({ heartbeat_interval_ms: HB_MS }, { tickMs: 20 });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const a = t.app.server.address();
  url = `http://127.0.0.1:${typeof a === 'object' && a !== null ? a.port : 0}`;
  node = await FixturePoolManager.start({
    nodeId: 'n1',
    pools: [{ pool_id: 'p', models: ['m'], slots: 1, engine_version: 'b1-test' }],
    token: TOKEN,
    tokenIntervalMs: 5,
  });
  await node.startHeartbeats(url, HB_MS);
  // Two turns of one session (a finished task, then one placed by affinity), one cancelled task.
  const session = crypto.randomUUID();
  for (const over of [{ session_id: session }, { session_id: session }, { max_tokens: 2000 }]) {
    const body = taskBody({ max_tokens: 4, ...over });
    taskIds.push(body.task_id as string);
    const res = await request(`${url}/v2/tasks`, {
      method: 'POST',
      headers: { ...t.auth, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = (await res.body.json()) as { streams: { sse: string } };
    expect(res.statusCode).toBe(202);
    const sse = await openSse(json.streams.sse, t.auth);
    if (over.max_tokens === 2000) {
      await sse.waitForFrame((f) => f.event === 'token');
      await (await request(`${url}/v2/tasks/${body.task_id}/cancel`, { method: 'POST', headers: t.auth })).body.dump();
    }
    await sse.done;
  }
  text = await (await request(`${url}/metrics`)).body.text();
  families = parsePrometheusText(text).families;
}, 60_000);

afterAll(async () => {
  await t?.close();
  await node?.close();
});

describe('orchestratord /metrics names', () => {
  it('lists every exported family: ours under llorch_, and the standard process and Node.js series', () => {
    const names = families.map((f) => f.name).sort();
    expect(names.filter((n) => n.startsWith('llorch_'))).toEqual(OURS);
    expect(
      names.filter((n) => !n.startsWith('llorch_') && !n.startsWith('process_') && !n.startsWith('nodejs_')),
    ).toEqual([]);
    for (const std of [
      'process_cpu_user_seconds_total',
      'process_resident_memory_bytes',
      'process_start_time_seconds',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
    ]) {
      expect(names, std).toContain(std);
    }
  });

  it('follows the naming rules: prefix, _total only on counters, base units, bounded labels', () => {
    expect(metricNamingProblems(families)).toEqual([]);
    // No task or session id anywhere in the text, label values included.
    for (const id of taskIds) expect(text).not.toContain(id);
  });

  it('the traffic is counted, latencies observed in seconds', () => {
    const fam = (name: string) => families.find((f) => f.name === name);
    expect(fam('llorch_tasks_started_total')?.samples.reduce((s, x) => s + x.value, 0)).toBe(3);
    expect(fam('llorch_tasks_canceled_total')?.samples).toEqual([
      expect.objectContaining({ labels: expect.objectContaining({ reason: 'client' }), value: 1 }),
    ]);
    expect(fam('llorch_placement_session_affinity_total')?.samples).toEqual([
      expect.objectContaining({ labels: { outcome: 'kept' }, value: 1 }),
    ]);
    const firstToken = fam('llorch_task_first_token_seconds');
    expect(firstToken?.type).toBe('histogram');
    const count = firstToken?.samples.find((s) => s.name.endsWith('_count'))?.value;
    const sum = firstToken?.samples.find((s) => s.name.endsWith('_sum'))?.value ?? Infinity;
    expect(count).toBe(3);
    // Seconds, not milliseconds: three first tokens over loopback take well under 30 s together.
    expect(sum).toBeGreaterThan(0);
    expect(sum).toBeLessThan(30);
    expect(fam('llorch_task_decode_seconds')?.samples.find((s) => s.name.endsWith('_count'))?.value).toBe(2);
  });

  it.skipIf('unavailable' in promtool)(`passes promtool check metrics${skipReason}`, async () => {
    expect(await promtoolCheckMetrics((promtool as { path: string }).path, text)).toEqual({ code: 0, output: '' });
  });
});
