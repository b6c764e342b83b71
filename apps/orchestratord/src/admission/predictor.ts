/**
 * Start and finish predictions from live measurements (never constants), as expected values, not
 * worst cases. Per pool, from the tasks that ended on it (EWMAs unless said):
 * - slot time: how long an ended task held its slot (dispatch → end), whatever made it short or
 *   long (early stops, continuous batching, prefill, relay overhead): the median of the last 16
 *   (and their 25th percentile, the fastest quarter, for refusals: see {@link missesDeadline});
 * - tokens per task (`tokens_out`) and the decode rate of one stream: node-reported `decode_tps`
 *   (heartbeat) or, until it reports one, tokens_out ÷ decode_ms;
 * - first-token latency (dispatch → first token);
 * and for pools still provisioning, the ETA the registry derives from heartbeat progress speed.
 *
 * throughput (tasks/ms) = Σ over serving pools of slots_total ÷ slot time;
 * wait   = 0 while the tasks ahead fit the free slots, else (ahead − free + 1) ÷ throughput
 *          (the new task starts when that many slots have been released);
 * start  = provisioning ETA + wait + first-token latency;
 * finish = provisioning ETA + wait + own service: first-token latency + the rest of the observed slot
 *          time scaled by own tokens ÷ observed tokens per task (before any task ended: own tokens ÷ rate),
 *          own tokens = expected_tokens when the client states it, else min(max_tokens, observed tokens per task).
 * A pool with no ended task yet gets a cold-start slot time from the new task's own tokens (its
 * max_tokens unless stated), and such a prediction is not `measured`: admission never refuses on it.
 *
 * Every input is explicit (`PredictionInput`): `ahead` and the pools' `slots_total`/`free` come from
 * the caller, so a shared store can pass the cluster queue's count and every replica's slots
 * without a change here. The observed rates are this process's samples.
 */

const ALPHA = 0.3;
/** Slot times kept per pool; their median is the typical task's. */
const SLOT_WINDOW = 16;

interface PoolStats {
  ttftMs?: number;
  tokensPerSec?: number;
  /** The last {@link SLOT_WINDOW} slot times, oldest first. */
  slotTimes?: number[];
  slotMs?: number;
  /** The fastest quarter's bound of the window (its 25th percentile). */
  fastSlotMs?: number;
  tokensOut?: number;
}

/** The `q` quantile (0..1) of `values`, interpolated between neighbours (q = 0.5: the median). */
function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return (sorted[lo] as number) + ((sorted[hi] as number) - (sorted[lo] as number)) * (at - lo);
}

/** What the predictor needs to know about a pool. */
export interface PredictorPool {
  readonly node_id: string;
  readonly pool_id: string;
  readonly slots_total: number;
  readonly free: number;
  /** Rate reported by the node, tokens/s of one stream (0 = not measured yet). */
  readonly decode_tps: number;
  /** True when the pool serves the model now (else it is provisioning/starting). */
  readonly serving: boolean;
  readonly provisioningEtaMs: number | undefined;
}

/** The task to predict and what it would wait behind. */
export interface PredictionInput {
  /** The task's token cap (`max_tokens`). */
  readonly maxTokens: number;
  /** The client's own estimate (`expected_tokens`), when it gave one. */
  readonly expectedTokens?: number | undefined;
  /** Tasks queued ahead of it that compete for the same pools. */
  readonly ahead: number;
  /** Pools that serve (or provision) the task's model. */
  readonly pools: readonly PredictorPool[];
}

export interface Prediction {
  /** Predicted wait until the first token, ms. */
  readonly startMs: number;
  /** Predicted service time of the task once placed (dispatch to end), ms; undefined when unknown. */
  readonly serviceMs: number | undefined;
  /** Predicted time from now until the task ends, ms; undefined when unknown. */
  readonly finishMs: number | undefined;
  /** The same end with the queue draining at the fastest quarter of the recent slot times: what admission refuses on. */
  readonly fastFinishMs: number | undefined;
  /** Tasks/s the serving pools complete together (undefined when unknown). */
  readonly throughputTps: number | undefined;
  /** Whether the prediction rests on measurements (observed tasks, or a stated expected_tokens), not on the max_tokens cap. */
  readonly measured: boolean;
}

/** Admission refuses only when the fast predicted end exceeds the deadline by this fraction of it. */
export const DEADLINE_MARGIN = 0.25;

/**
 * Whether a prediction says the task would miss `deadlineMs`: its end with the queue draining at
 * the fastest quarter of the recent slot times, plus {@link DEADLINE_MARGIN} of the deadline, is
 * still late. Never on an unmeasured prediction. Two margins because the engine's speed swings
 * (on a shared 2-core machine several-fold within a minute): a task refused has little chance.
 */
export function missesDeadline(prediction: Prediction, deadlineMs: number): boolean {
  const end = prediction.fastFinishMs ?? prediction.finishMs;
  return prediction.measured && end !== undefined && end > deadlineMs * (1 + DEADLINE_MARGIN);
}

function ewma(prev: number | undefined, sample: number): number {
  return prev === undefined ? sample : prev + ALPHA * (sample - prev);
}

interface PoolEstimate {
  readonly slots: number;
  readonly ttft: number;
  /** Slot time of a task in the queue, ms: observed, else the cold-start estimate from the new task's tokens. */
  readonly slotMs: number | undefined;
  readonly fastSlotMs: number | undefined;
  /** Slot time of the new task, ms. */
  readonly ownMs: number | undefined;
  /** Rests on tasks observed on the pool, or on the client's stated expected_tokens. */
  readonly measured: boolean;
}

export class Predictor {
  readonly #stats = new Map<string, PoolStats>();

  #get(nodeId: string, poolId: string): PoolStats {
    const key = `${nodeId}/${poolId}`;
    let s = this.#stats.get(key);
    if (s === undefined) {
      s = {};
      this.#stats.set(key, s);
    }
    return s;
  }

  /** Records dispatch → first token latency. */
  observeFirstToken(nodeId: string, poolId: string, ms: number): void {
    const s = this.#get(nodeId, poolId);
    s.ttftMs = ewma(s.ttftMs, Math.max(0, ms));
  }

  /** Records an ended task's tokens and decode rate. */
  observeEnd(nodeId: string, poolId: string, tokensOut: number, decodeMs: number): void {
    if (tokensOut < 0) return;
    const s = this.#get(nodeId, poolId);
    s.tokensOut = ewma(s.tokensOut, tokensOut);
    if (tokensOut > 0 && decodeMs > 0) s.tokensPerSec = ewma(s.tokensPerSec, (tokensOut * 1000) / decodeMs);
  }

  /**
   * Records how long an ended task held its slot (dispatch → end), ms. The pool's slot time is the
   * median of the last {@link SLOT_WINDOW}: one outlier (a fresh engine's first task takes several
   * times longer) does not move it.
   */
  observeSlotTime(nodeId: string, poolId: string, ms: number): void {
    const s = this.#get(nodeId, poolId);
    const times = (s.slotTimes ??= []);
    times.push(Math.max(0, ms));
    if (times.length > SLOT_WINDOW) times.shift();
    s.slotMs = quantile(times, 0.5);
    s.fastSlotMs = quantile(times, 0.25);
  }

  /** Tokens per second of one stream on a pool: reported by its node, else observed; undefined when unknown. */
  rateOf(pool: PredictorPool): number | undefined {
    if (pool.decode_tps > 0) return pool.decode_tps;
    return this.#stats.get(`${pool.node_id}/${pool.pool_id}`)?.tokensPerSec;
  }

  ttftOf(pool: PredictorPool): number {
    return this.#stats.get(`${pool.node_id}/${pool.pool_id}`)?.ttftMs ?? 0;
  }

  #estimate(pool: PredictorPool, input: PredictionInput): PoolEstimate {
    const s = this.#stats.get(`${pool.node_id}/${pool.pool_id}`);
    const rate = this.rateOf(pool);
    const ttft = s?.ttftMs ?? 0;
    const ownTokens = input.expectedTokens ?? Math.min(input.maxTokens, s?.tokensOut ?? input.maxTokens);
    const observed =
      s?.slotMs !== undefined && s.tokensOut !== undefined && s.tokensOut > 0
        ? { slotMs: s.slotMs, tokens: s.tokensOut }
        : undefined;
    // A slot time observed under the pool's real load (batching, contention) beats the decode rate of one stream.
    const ownMs =
      observed !== undefined
        ? ttft + Math.max(0, observed.slotMs - ttft) * (ownTokens / observed.tokens)
        : rate !== undefined && rate > 0
          ? ttft + (ownTokens / rate) * 1000
          : s?.slotMs;
    const measured =
      s?.slotMs !== undefined ||
      (ownMs !== undefined && (input.expectedTokens !== undefined || s?.tokensOut !== undefined));
    return {
      slots: pool.slots_total,
      ttft,
      slotMs: s?.slotMs ?? ownMs,
      fastSlotMs: s?.fastSlotMs ?? s?.slotMs ?? ownMs,
      ownMs,
      measured,
    };
  }

  predict(input: PredictionInput): Prediction {
    const { ahead, pools } = input;
    const serving = pools.filter((p) => p.serving);
    const considered = serving.length > 0 ? serving : pools;
    if (considered.length === 0)
      return {
        startMs: 0,
        serviceMs: undefined,
        finishMs: undefined,
        fastFinishMs: undefined,
        throughputTps: undefined,
        measured: false,
      };
    const prepMs = serving.length > 0 ? 0 : Math.min(...considered.map((p) => p.provisioningEtaMs ?? 0));
    const free = serving.reduce((n, p) => n + p.free, 0);
    const est = considered.map((p) => this.#estimate(p, input));
    const ttft = est.reduce((n, e) => n + e.ttft, 0) / est.length;
    // Slots released per ms across the pools: a pool whose slot time is unknown adds none.
    const perMs = est.reduce((n, e) => (e.slotMs !== undefined && e.slotMs > 0 ? n + e.slots / e.slotMs : n), 0);
    const fastPerMs = est.reduce(
      (n, e) => (e.fastSlotMs !== undefined && e.fastSlotMs > 0 ? n + e.slots / e.fastSlotMs : n),
      0,
    );
    const own = est.filter((e) => e.ownMs !== undefined);
    const serviceMs = own.length > 0 ? own.reduce((n, e) => n + (e.ownMs ?? 0), 0) / own.length : undefined;
    const queued = ahead >= free;
    const waitMs = queued && perMs > 0 ? (ahead - free + 1) / perMs : 0;
    const known = serviceMs !== undefined && (!queued || perMs > 0);
    return {
      startMs: Math.round(prepMs + waitMs + ttft),
      serviceMs: serviceMs === undefined ? undefined : Math.round(serviceMs),
      finishMs: known ? Math.round(prepMs + waitMs + (serviceMs ?? 0)) : undefined,
      fastFinishMs: known
        ? Math.round(prepMs + (queued && fastPerMs > 0 ? (ahead - free + 1) / fastPerMs : 0) + (serviceMs ?? 0))
        : undefined,
      throughputTps: perMs > 0 ? perMs * 1000 : undefined,
      measured: known && est.some((e) => e.measured),
    };
  }
}

/**
 * Heuristic probability of finishing before the deadline: a logistic curve on the slack between
 * the time left and the time needed (0.5 when they are equal, → 1 with ample slack).
 */
export function onTimeProbability(remainingMs: number, neededMs: number): number {
  if (remainingMs <= 0) return 0;
  if (neededMs <= 0) return 1;
  const p = 1 / (1 + Math.exp((-4 * (remainingMs - neededMs)) / Math.max(neededMs, 1000)));
  return Math.round(Math.min(1, Math.max(0, p)) * 1000) / 1000;
}
