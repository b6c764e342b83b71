/**
 * Start-time and duration predictions from live measurements (never constants):
 * - per pool, the decode rate its node reports (`decode_tps`, heartbeat) or, until it reports one,
 *   the rate observed from our own ended tasks (tokens_out ÷ decode_ms), as an EWMA;
 * - per pool, the observed dispatch → first token latency (EWMA);
 * - for pools still provisioning, the ETA the registry derives from heartbeat progress speed.
 *
 * predicted_start_ms = provisioning ETA + queue wait + first-token latency, where
 *   queue wait = 0 while the tasks ahead fit in the free slots, else
 *   (⌊(ahead − free) ÷ slots⌋ + 1) × per-task service time (expected tokens ÷ decode rate + first-token latency).
 * When nothing is measured yet the unknown parts count as 0 and `measured` is false, so admission
 * never rejects a deadline on a guess.
 */

const ALPHA = 0.3;

interface PoolStats {
  ttftMs?: number;
  tokensPerSec?: number;
}

/** What the predictor needs to know about a pool. */
export interface PredictorPool {
  readonly node_id: string;
  readonly pool_id: string;
  readonly slots_total: number;
  readonly free: number;
  /** Rate reported by the node, tokens/s (0 = not measured yet). */
  readonly decode_tps: number;
  /** True when the pool serves the model now (else it is provisioning/starting). */
  readonly serving: boolean;
  readonly provisioningEtaMs: number | undefined;
}

export interface Prediction {
  /** Predicted wait until the first token, ms. */
  readonly startMs: number;
  /** Predicted service time of the task once placed (first token to end), ms; undefined when unknown. */
  readonly serviceMs: number | undefined;
  /** Whether the queue-wait part rests on measurements. */
  readonly measured: boolean;
}

function ewma(prev: number | undefined, sample: number): number {
  return prev === undefined ? sample : prev + ALPHA * (sample - prev);
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

  /** Records an ended task's decode rate. */
  observeEnd(nodeId: string, poolId: string, tokensOut: number, decodeMs: number): void {
    if (tokensOut <= 0 || decodeMs <= 0) return;
    const s = this.#get(nodeId, poolId);
    s.tokensPerSec = ewma(s.tokensPerSec, (tokensOut * 1000) / decodeMs);
  }

  /** Tokens per second for a pool: reported by its node, else observed; undefined when unknown. */
  rateOf(pool: PredictorPool): number | undefined {
    if (pool.decode_tps > 0) return pool.decode_tps;
    return this.#stats.get(`${pool.node_id}/${pool.pool_id}`)?.tokensPerSec;
  }

  ttftOf(pool: PredictorPool): number {
    return this.#stats.get(`${pool.node_id}/${pool.pool_id}`)?.ttftMs ?? 0;
  }

  /**
   * @param tokens expected tokens of the task (expected_tokens ?? max_tokens)
   * @param ahead tasks queued ahead of it that compete for the same pools
   * @param pools pools that serve (or provision) the task's model
   */
  predict(tokens: number, ahead: number, pools: readonly PredictorPool[]): Prediction {
    const serving = pools.filter((p) => p.serving);
    const considered = serving.length > 0 ? serving : pools;
    if (considered.length === 0) return { startMs: 0, serviceMs: undefined, measured: false };
    const prepMs = serving.length > 0 ? 0 : Math.min(...considered.map((p) => p.provisioningEtaMs ?? 0));
    const slots = considered.reduce((n, p) => n + p.slots_total, 0);
    const free = serving.reduce((n, p) => n + p.free, 0);
    const rates = considered.map((p) => this.rateOf(p)).filter((r): r is number => r !== undefined && r > 0);
    const ttft = considered.reduce((n, p) => n + this.ttftOf(p), 0) / considered.length;
    const serviceMs = rates.length > 0 ? (tokens / (rates.reduce((a, b) => a + b, 0) / rates.length)) * 1000 + ttft : undefined;
    let waitMs = 0;
    if (ahead >= free && slots > 0 && serviceMs !== undefined) {
      waitMs = (Math.floor((ahead - free) / slots) + 1) * serviceMs;
    }
    const measured = serviceMs !== undefined || ahead < free;
    return { startMs: Math.round(prepMs + waitMs + ttft), serviceMs: serviceMs === undefined ? undefined : Math.round(serviceMs), measured };
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
