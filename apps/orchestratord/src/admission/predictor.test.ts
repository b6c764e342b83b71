import { describe, expect, it } from 'vitest';
import { onTimeProbability, Predictor, type PredictorPool } from './predictor.js';

const pool = (over: Partial<PredictorPool> = {}): PredictorPool => ({
  node_id: 'n',
  pool_id: 'p',
  slots_total: 2,
  free: 0,
  decode_tps: 0,
  serving: true,
  provisioningEtaMs: undefined,
  ...over,
});

describe('Predictor', () => {
  it('is 0 and unmeasured while nothing is known', () => {
    expect(new Predictor().predict(100, 5, [pool()])).toEqual({ startMs: 0, serviceMs: undefined, measured: false });
    expect(new Predictor().predict(100, 0, [])).toMatchObject({ startMs: 0, measured: false });
  });

  it('uses the node-reported rate, else the rate observed from ended tasks', () => {
    const p = new Predictor();
    expect(p.predict(100, 0, [pool({ decode_tps: 50 })])).toEqual({ startMs: 2000, serviceMs: 2000, measured: true });
    p.observeEnd('n', 'p', 200, 1000); // 200 tok/s
    expect(p.predict(100, 0, [pool()]).startMs).toBe(500);
    expect(p.predict(100, 0, [pool({ decode_tps: 50 })]).startMs).toBe(2000);
  });

  it('waits nothing while the tasks ahead fit the free slots, then whole service times per wave', () => {
    const p = new Predictor();
    const pools = [pool({ decode_tps: 100, free: 2, slots_total: 2 })];
    expect(p.predict(100, 0, pools).startMs).toBe(0);
    expect(p.predict(100, 1, pools).startMs).toBe(0);
    expect(p.predict(100, 2, pools).startMs).toBe(1000);
    expect(p.predict(100, 4, pools).startMs).toBe(2000);
  });

  it('adds the measured first-token latency and the provisioning ETA', () => {
    const p = new Predictor();
    p.observeFirstToken('n', 'p', 40);
    expect(p.predict(10, 0, [pool({ free: 1, decode_tps: 100 })]).startMs).toBe(40);
    const provisioning = pool({ serving: false, provisioningEtaMs: 3000, decode_tps: 0, pool_id: 'q' });
    expect(p.predict(10, 0, [provisioning])).toMatchObject({ startMs: 3000, measured: false });
  });

  it('on_time_probability: 0 when late, 1 with nothing to do, 0.5 at equality, rising with slack', () => {
    expect(onTimeProbability(0, 10)).toBe(0);
    expect(onTimeProbability(1000, 0)).toBe(1);
    expect(onTimeProbability(2000, 2000)).toBe(0.5);
    expect(onTimeProbability(4000, 2000)).toBeGreaterThan(0.95);
    expect(onTimeProbability(1000, 2000)).toBeLessThan(0.5);
  });
});
