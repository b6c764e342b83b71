import { describe, expect, it } from 'vitest';
import {
  DEADLINE_MARGIN,
  missesDeadline,
  onTimeProbability,
  Predictor,
  type Prediction,
  type PredictorPool,
} from './predictor.js';

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

/** `count` tasks ended on n/p: each `tokens` tokens, decoded at `tps`, holding its slot `slotMs`. */
function observe(p: Predictor, count: number, tokens: number, tps: number, slotMs: number, poolId = 'p'): void {
  for (let i = 0; i < count; i += 1) {
    p.observeEnd('n', poolId, tokens, (tokens * 1000) / tps);
    p.observeSlotTime('n', poolId, slotMs);
  }
}

describe('Predictor', () => {
  it('is 0 and unmeasured while nothing is known', () => {
    expect(new Predictor().predict({ maxTokens: 100, ahead: 5, pools: [pool()] })).toEqual({
      startMs: 0,
      serviceMs: undefined,
      finishMs: undefined,
      fastFinishMs: undefined,
      throughputTps: undefined,
      measured: false,
    });
    expect(new Predictor().predict({ maxTokens: 100, ahead: 0, pools: [] })).toMatchObject({
      startMs: 0,
      measured: false,
    });
  });

  it('uses the node-reported rate, else the rate observed from ended tasks', () => {
    const p = new Predictor();
    expect(p.predict({ maxTokens: 100, ahead: 0, pools: [pool({ decode_tps: 50, free: 1 })] })).toMatchObject({
      startMs: 0,
      serviceMs: 2000,
      finishMs: 2000,
    });
    p.observeEnd('n', 'p', 200, 1000); // 200 tok/s, 200 tokens a task
    expect(p.predict({ maxTokens: 100, ahead: 0, pools: [pool({ free: 1 })] }).serviceMs).toBe(500);
    expect(p.predict({ maxTokens: 100, ahead: 0, pools: [pool({ decode_tps: 50, free: 1 })] }).serviceMs).toBe(2000);
  });

  it('a cold start (no task ended, no expected_tokens) estimates from max_tokens but is not measured, so it never refuses', () => {
    const p = new Predictor();
    const cold = p.predict({ maxTokens: 1000, ahead: 9, pools: [pool({ decode_tps: 10, slots_total: 1 })] });
    // 10 slot releases of 100 s each, then its own 100 s.
    expect(cold).toMatchObject({ startMs: 1_000_000, finishMs: 1_100_000, measured: false });
    expect(missesDeadline(cold, 1000)).toBe(false);
    // The client's own estimate is a measurement of the task's size: now it may refuse.
    const stated = p.predict({
      maxTokens: 1000,
      expectedTokens: 1000,
      ahead: 9,
      pools: [pool({ decode_tps: 10, slots_total: 1 })],
    });
    expect(stated).toMatchObject({ finishMs: 1_100_000, measured: true });
    expect(missesDeadline(stated, 1000)).toBe(true);
  });

  it('waits nothing while the tasks ahead fit the free slots, then one observed slot time per slot released', () => {
    const p = new Predictor();
    observe(p, 1, 100, 100, 1000); // 100 tokens at 100 tok/s: 1 s a slot
    const pools = [pool({ decode_tps: 100, free: 2, slots_total: 2 })];
    expect(p.predict({ maxTokens: 100, ahead: 0, pools }).startMs).toBe(0);
    expect(p.predict({ maxTokens: 100, ahead: 1, pools }).startMs).toBe(0);
    // 2 slots releasing one task each per 1000 ms: one release every 500 ms.
    expect(p.predict({ maxTokens: 100, ahead: 2, pools }).startMs).toBe(500);
    expect(p.predict({ maxTokens: 100, ahead: 4, pools })).toMatchObject({
      startMs: 1500,
      finishMs: 2500,
      throughputTps: 2,
      measured: true,
    });
  });

  it('credits tasks that stop early: the queue drains at the observed slot time, not at max_tokens ÷ rate', () => {
    const p = new Predictor();
    // The flood of issue 25: max_tokens 1024, but each task ends after 8 tokens, holding a slot 140 ms.
    observe(p, 20, 8, 100, 140);
    const pools = [pool({ decode_tps: 100, slots_total: 2 })];
    const flood = p.predict({ maxTokens: 1024, ahead: 1000, pools });
    // 1001 releases at 2 slots / 140 ms, then its own 8 tokens: one typical slot time.
    expect(flood.startMs).toBe(70_070);
    expect(flood.finishMs).toBe(70_210);
    expect(flood.throughputTps).toBeCloseTo(2000 / 140, 6);
    expect(missesDeadline(flood, 120_000)).toBe(false);
    // Twice the queue is an honest miss of a 120 s deadline.
    expect(missesDeadline(p.predict({ maxTokens: 1024, ahead: 2400, pools }), 120_000)).toBe(true);
    // A task that says it needs 125× the typical tokens gets 125× the typical slot time (not the one-stream rate's 10 s).
    expect(
      p.predict({ maxTokens: 1024, expectedTokens: 1000, ahead: 0, pools: [pool({ decode_tps: 100, free: 1 })] })
        .finishMs,
    ).toBe(17_500);
    // Its own tokens never exceed its max_tokens.
    observe(p, 30, 500, 100, 5000); // the median of the last 16 slot times and the tokens EWMA follow
    expect(p.predict({ maxTokens: 10, ahead: 0, pools: [pool({ decode_tps: 100, free: 1 })] }).serviceMs).toBe(100);
  });

  it("takes the median of the last 16 slot times: a fresh engine's slow first task does not hold the estimate up", () => {
    const p = new Predictor();
    observe(p, 1, 500, 100, 18_000);
    observe(p, 3, 500, 100, 3000);
    const pools = [pool({ slots_total: 2 })];
    expect(p.predict({ maxTokens: 500, ahead: 1, pools }).startMs).toBe(3000);
    // Only the last 16 count: 16 slower tasks replace the 3 s ones entirely.
    observe(p, 16, 500, 100, 5000);
    expect(p.predict({ maxTokens: 500, ahead: 1, pools }).startMs).toBe(5000);
  });

  it('adds up the throughput of every slot serving the model, across pools', () => {
    const p = new Predictor();
    observe(p, 1, 10, 100, 100, 'a');
    observe(p, 1, 10, 100, 400, 'b');
    const pools = [pool({ pool_id: 'a', slots_total: 2 }), pool({ pool_id: 'b', slots_total: 4 })];
    // 2/100 + 4/400 = 0.03 slots released per ms = 30 tasks/s.
    const pred = p.predict({ maxTokens: 10, ahead: 29, pools });
    expect(pred.throughputTps).toBeCloseTo(30, 6);
    expect(pred.startMs).toBe(1000);
    // A pool nothing ended on yet adds a cold-start slot time from the task's own tokens.
    const withNew = p.predict({
      maxTokens: 100,
      ahead: 29,
      pools: [...pools, pool({ pool_id: 'c', slots_total: 1, decode_tps: 100 })],
    });
    expect(withNew.throughputTps).toBeCloseTo(31, 6);
  });

  it('adds the measured first-token latency and the provisioning ETA', () => {
    const p = new Predictor();
    p.observeFirstToken('n', 'p', 40);
    expect(p.predict({ maxTokens: 10, ahead: 0, pools: [pool({ free: 1, decode_tps: 100 })] })).toMatchObject({
      startMs: 40,
      serviceMs: 140,
    });
    const provisioning = pool({ serving: false, provisioningEtaMs: 3000, decode_tps: 0, pool_id: 'q' });
    expect(p.predict({ maxTokens: 10, ahead: 0, pools: [provisioning] })).toMatchObject({
      startMs: 3000,
      measured: false,
    });
  });

  it(`refuses only past the deadline plus ${DEADLINE_MARGIN * 100} % of it, and never without a measured end`, () => {
    const at = (finishMs: number | undefined, measured = true, fastFinishMs?: number): Prediction => ({
      startMs: 0,
      serviceMs: 0,
      finishMs,
      fastFinishMs,
      throughputTps: 1,
      measured,
    });
    expect(missesDeadline(at(1000), 1000)).toBe(false);
    expect(missesDeadline(at(1000 * (1 + DEADLINE_MARGIN)), 1000)).toBe(false);
    expect(missesDeadline(at(1000 * (1 + DEADLINE_MARGIN) + 1), 1000)).toBe(true);
    expect(missesDeadline(at(10_000, false), 1000)).toBe(false);
    expect(missesDeadline(at(undefined), 1000)).toBe(false);
    // The fast end decides when there is one: an expected end late by 4× is not refused while the fast one fits.
    expect(missesDeadline(at(4000, true, 1200), 1000)).toBe(false);
    expect(missesDeadline(at(4000, true, 1300), 1000)).toBe(true);
  });

  it('refuses on the queue draining at the fastest quarter of the recent slot times; predicts with their median', () => {
    const p = new Predictor();
    for (const ms of [100, 100, 200, 200, 400, 400, 400, 400]) observe(p, 1, 8, 100, ms);
    const pools = [pool({ slots_total: 2 })];
    // median 300 ms, 25th percentile 175 ms (interpolated): 100 releases at 2 slots.
    const pred = p.predict({ maxTokens: 8, ahead: 99, pools });
    expect(pred.startMs).toBe(15_000);
    expect(pred.finishMs).toBe(15_300);
    expect(pred.fastFinishMs).toBe(9050);
    expect(missesDeadline(pred, 10_000)).toBe(false);
    expect(missesDeadline(pred, 7000)).toBe(true);
  });

  it('on_time_probability: 0 when late, 1 with nothing to do, 0.5 at equality, rising with slack', () => {
    expect(onTimeProbability(0, 10)).toBe(0);
    expect(onTimeProbability(1000, 0)).toBe(1);
    expect(onTimeProbability(2000, 2000)).toBe(0.5);
    expect(onTimeProbability(4000, 2000)).toBeGreaterThan(0.95);
    expect(onTimeProbability(1000, 2000)).toBeLessThan(0.5);
  });
});
