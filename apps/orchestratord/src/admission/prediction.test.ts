import { afterEach, describe, expect, it } from 'vitest';
import { NodeRegistry } from '../registry/node-registry.js';
import { captureLogger, ManualClock, snapshot } from '../testing/test-helpers.js';
import { predictClusterWait } from './prediction.js';
import { Predictor } from './predictor.js';

describe("predictClusterWait (the dashboard's predicted wait)", () => {
  const registries: NodeRegistry[] = [];
  afterEach(async () => {
    await Promise.all(registries.splice(0).map((r) => r.close()));
  });

  const cluster = () => {
    const clock = new ManualClock();
    const r = new NodeRegistry({ heartbeatIntervalMs: 60_000, clock, logger: captureLogger().logger });
    registries.push(r);
    const node = (id: string, pools: ReturnType<typeof snapshot>[]) => {
      r.register({
        node_id: id,
        machine_id: id,
        address: 'http://127.0.0.1:9',
        pools,
        capabilities: { gpus: [], cpu_cores: 1, ram_total_bytes: 1 },
        version: 'x',
      });
      r.heartbeat(id, { timestamp: new Date(clock.now()).toISOString(), pools });
    };
    return { r, node };
  };

  it('is the longest predicted start over the models served; 0 for an idle or empty cluster', () => {
    const { r, node } = cluster();
    const input = (ahead: Record<string, number>, tokens = 100) => ({
      predictor: new Predictor(),
      pools: r.pools(),
      poolsForModel: (m: string) => r.poolsForModel(m),
      ahead: (m: string) => ahead[m] ?? 0,
      tokens,
    });
    expect(predictClusterWait(input({}))).toBe(0);
    node('n1', [
      snapshot({ pool_id: 'fast', models: ['m1'], decode_tps: 100 }),
      snapshot({ pool_id: 'slow', models: ['m2'], decode_tps: 10 }),
    ]);
    expect(predictClusterWait(input({}))).toBe(0); // a free slot each
    // m2: 3 ahead, 1 free slot of 1 → 3 waves of 100 tokens at 10 tok/s.
    expect(predictClusterWait(input({ m1: 1, m2: 3 }))).toBe(30_000);
    expect(predictClusterWait(input({ m1: 3, m2: 0 }))).toBe(3000);
  });

  it('ignores the models of offline nodes', () => {
    const { r, node } = cluster();
    node('n1', [snapshot({ pool_id: 'p', models: ['m'], decode_tps: 10 })]);
    const predictor = new Predictor();
    const wait = (offline: boolean) =>
      predictClusterWait({
        predictor,
        pools: r.pools().map((v) => (offline ? { ...v, node_state: 'offline' as const } : v)),
        poolsForModel: (m) => r.poolsForModel(m),
        ahead: () => 5,
        tokens: 10,
      });
    expect(wait(false)).toBe(5000);
    expect(wait(true)).toBe(0);
  });
});
