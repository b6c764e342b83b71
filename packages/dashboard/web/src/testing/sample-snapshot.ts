import type { DashboardSnapshot } from '@llama-orch/contracts';

/** A small but complete snapshot for the page's unit tests (one node, one pool, one ended task). */
export function sampleSnapshot(over: Partial<DashboardSnapshot> = {}): DashboardSnapshot {
  const now = Date.parse('2026-11-25T16:00:10.000Z');
  return {
    version: '0.1.0',
    generated_at_ms: now,
    bucket_ms: 10_000,
    nodes: [
      {
        node_id: 'n1',
        machine_id: 'host-a',
        address: 'http://127.0.0.1:9001',
        state: 'online',
        state_since: '2026-11-25T15:59:00.000Z',
        last_seen: '2026-11-25T16:00:09.000Z',
        capabilities: {
          gpus: [
            {
              device_id: 0,
              name: 'NVIDIA H100 80GB HBM3',
              vram_total_bytes: 85_520_809_984,
              compute_capability: '9.0',
            },
          ],
          cpu_cores: 16,
          ram_total_bytes: 137_438_953_472,
        },
        version: '0.1.0',
        pools: [
          {
            pool_id: 'p1',
            state: 'ready',
            ready: true,
            draining: false,
            slots_total: 2,
            slots_free: 1,
            models: ['synthetic:llama', 'synthetic-llama-abc'],
            aliases: ['synthetic'],
            engine_version: 'b6500',
            ctx: 2048,
            deterministic: false,
            decode_tps: 40,
            vram_free_bytes: 60 * 1024 ** 3,
          },
        ],
      },
    ],
    pools: [
      {
        pool_id: 'p1',
        node_id: 'n1',
        node_state: 'online',
        state: 'ready',
        ready: true,
        draining: false,
        slots_total: 2,
        slots_free: 1,
        leased: 1,
        models: ['synthetic:llama', 'synthetic-llama-abc'],
        aliases: ['synthetic'],
        engine_version: 'b6500',
        vram_free_bytes: 60 * 1024 ** 3,
      },
    ],
    queue: { depth: { interactive: 2, batch: 1 }, capacity: 100, running: 1, predicted_wait_ms: 1500 },
    throughput: [
      { t_ms: now - 20_000, tokens_per_s: 10, ttft_p50_ms: 50, tasks_ended: 1 },
      { t_ms: now - 10_000, tokens_per_s: 30, tasks_ended: 2 },
    ],
    recent_tasks: [
      {
        task_id: '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0',
        correlation_id: 'c0ffee00-0000-4000-8000-000000000001',
        model: 'synthetic',
        priority: 'interactive',
        node_id: 'n1',
        pool_id: 'p1',
        tokens_out: 12,
        ttft_ms: 42,
        duration_ms: 300,
        outcome: 'ok',
        ended_at_ms: now - 5000,
      },
    ],
    replicas: [
      {
        replica_id: 'orchd-a',
        address: 'http://10.0.0.5:8080',
        version: '0.1.0',
        up_since_ms: now - 3_600_000,
        tasks_relayed: 41,
        load: 1,
      },
    ],
    ...over,
  };
}
