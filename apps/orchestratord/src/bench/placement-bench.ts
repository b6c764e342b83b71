#!/usr/bin/env node
import type { PoolSnapshot } from '@llama-orch/contracts';
import { pino } from 'pino';
import { NodeRegistry } from '../node-registry.js';
import { place, type PlacementRequest, type PlacementStrategy, type PoolCandidate, type RoundRobinCursor } from '../placement.js';

/**
 * Placement at scale, for `pnpm bench placement` (bench/ spawns this file: it may not import
 * orchestratord, so the measurement lives next to the code it measures). Prints one JSON object.
 *
 * A seeded registry of `NODES` nodes × `POOLS_PER_NODE` pools with random load (slots, free slots,
 * states, models, determinism, ctx) and a stream of random tasks (model, ctx, strict determinism,
 * prefer/pin overrides). Each decision is timed alone with `process.hrtime.bigint()`; between
 * decisions (untimed) a few pools get new random load, so no decision sees the same registry twice.
 *   - `place`: the pure decision over the candidate array (what the dispatcher does per queued task);
 *   - `registry_then_place`: `NodeRegistry.pools()` (views with lease accounting, sorted) and then
 *     `place()`, i.e. a decision including the registry snapshot the dispatcher takes per pump.
 */

const NODES = Number(process.env.PLACEMENT_NODES ?? 1000);
const POOLS_PER_NODE = Number(process.env.PLACEMENT_POOLS_PER_NODE ?? 4);
const MODELS = 16;
const WARMUP = Number(process.env.PLACEMENT_WARMUP ?? 2000);
const DECISIONS = Number(process.env.PLACEMENT_DECISIONS ?? 20_000);
/** The registry variant rebuilds 4,000 views per decision: fewer samples keep the run short. */
const REGISTRY_DECISIONS = Number(process.env.PLACEMENT_REGISTRY_DECISIONS ?? 3000);

/** mulberry32: small, seeded, good enough to spread load. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const random = rng(20_251_121);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
const model = (i: number): string => `hf:org/model-${i}/model-${i}.Q4_K_M.gguf`;

function randomSnapshot(poolId: string): PoolSnapshot {
  const slots = pick([1, 2, 4, 8, 16]);
  const r = random();
  const state = r < 0.9 ? 'ready' : r < 0.95 ? 'starting' : r < 0.98 ? 'draining' : 'failed';
  return {
    pool_id: poolId,
    state,
    ready: state === 'ready',
    draining: state === 'draining',
    slots_total: slots,
    slots_free: state === 'ready' ? Math.floor(random() * (slots + 1)) : 0,
    models: [model(Math.floor(random() * MODELS))],
    engine_version: 'b1-bench',
    ctx: pick([2048, 4096, 8192]),
    deterministic: random() < 0.3,
    decode_tps: 50 + random() * 100,
  };
}

function toCandidate(nodeId: string, s: PoolSnapshot): PoolCandidate {
  return {
    node_id: nodeId, pool_id: s.pool_id, node_state: 'online', state: s.state, ready: s.ready, draining: s.draining,
    slots_total: s.slots_total, free: s.slots_free, leased: 0, models: s.models, deterministic: s.deterministic, ctx: s.ctx,
  };
}

const nodeId = (n: number): string => `node-${String(n).padStart(4, '0')}`;
const poolId = (n: number, p: number): string => `n${n}-p${p}`;

function randomRequest(): PlacementRequest {
  const r = random();
  const req: PlacementRequest = {
    model_ref: model(Math.floor(random() * MODELS)),
    ctx: pick([0, 0, 1024, 4096]),
    determinism: random() < 0.2 ? 'strict' : undefined,
    placement: r < 0.8 ? undefined
      : r < 0.9 ? { mode: 'prefer', prefer_pools: [poolId(Math.floor(random() * NODES), 0), poolId(Math.floor(random() * NODES), 1)], allow_fallback: true }
        : { mode: 'pin', pin_pool_id: poolId(Math.floor(random() * NODES), Math.floor(random() * POOLS_PER_NODE)), allow_fallback: false },
  };
  return req;
}

interface Summary { n: number; min: number; p50: number; p90: number; p99: number; max: number; mean: number }

function summarize(values: number[]): Summary {
  const s = [...values].sort((a, b) => a - b);
  const at = (p: number): number => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] as number;
  const r = (v: number): number => Math.round(v * 1000) / 1000;
  return { n: s.length, min: r(s[0] ?? NaN), p50: r(at(50)), p90: r(at(90)), p99: r(at(99)), max: r(s[s.length - 1] ?? NaN), mean: r(s.reduce((a, b) => a + b, 0) / s.length) };
}

function timerOverheadUs(): number {
  const xs: number[] = [];
  for (let i = 0; i < 10_000; i++) {
    const t0 = process.hrtime.bigint();
    const t1 = process.hrtime.bigint();
    xs.push(Number(t1 - t0) / 1000);
  }
  return summarize(xs).p50;
}

/**
 * `byModel`: what place() costs when handed only the pools that serve the task's model (a per-model
 * index the registry could keep, updated outside the timed region as load changes). Not what the
 * dispatcher does today: reported apart, as the effect of that proposed change.
 */
function benchPlace(strategy: PlacementStrategy, byModel = false): { us: Summary; outcomes: Record<string, number> } {
  const candidates: PoolCandidate[] = [];
  for (let n = 0; n < NODES; n++) for (let p = 0; p < POOLS_PER_NODE; p++) candidates.push(toCandidate(nodeId(n), randomSnapshot(poolId(n, p))));
  // Per-model lists kept in step with `candidates` (each pool serves one model here).
  const index = new Map<string, PoolCandidate[]>();
  if (byModel) for (const c of candidates) for (const m of c.models) index.set(m, [...(index.get(m) ?? []), c]);
  const reindex = (old: PoolCandidate, next: PoolCandidate): void => {
    for (const m of old.models) index.set(m, (index.get(m) ?? []).filter((c) => c !== old));
    for (const m of next.models) index.set(m, [...(index.get(m) ?? []), next]);
  };
  const cursor: RoundRobinCursor = { next: 0 };
  const us: number[] = [];
  const outcomes: Record<string, number> = {};
  for (let i = 0; i < WARMUP + DECISIONS; i++) {
    for (let k = 0; k < 4; k++) {
      const idx = Math.floor(random() * candidates.length);
      const c = candidates[idx] as PoolCandidate;
      const next = toCandidate(c.node_id, randomSnapshot(c.pool_id));
      candidates[idx] = next;
      if (byModel) reindex(c, next);
    }
    const req = randomRequest();
    const pool = byModel ? (index.get(req.model_ref) ?? []) : candidates;
    const t0 = process.hrtime.bigint();
    const d = place(req, pool, strategy, cursor);
    const t1 = process.hrtime.bigint();
    if (i < WARMUP) continue;
    us.push(Number(t1 - t0) / 1000);
    outcomes[d.kind] = (outcomes[d.kind] ?? 0) + 1;
  }
  return { us: summarize(us), outcomes };
}

function benchRegistry(): { us: Summary; pools_us: Summary; outcomes: Record<string, number> } {
  const registry = new NodeRegistry({ heartbeatIntervalMs: 600_000, clock: { now: () => Date.now() }, logger: pino({ level: 'silent' }) });
  const snapshots = new Map<number, PoolSnapshot[]>();
  const timestamp = new Date().toISOString();
  for (let n = 0; n < NODES; n++) {
    const pools = Array.from({ length: POOLS_PER_NODE }, (_, p) => randomSnapshot(poolId(n, p)));
    snapshots.set(n, pools);
    registry.register({
      node_id: nodeId(n), machine_id: `m${n}`, address: `http://10.0.${n >> 8}.${n & 255}:9200`, pools,
      capabilities: { gpus: [], cpu_cores: 16, ram_total_bytes: 64 * 2 ** 30 }, version: 'bench',
    });
    // 1 % of nodes never heartbeat: they stay `registering` and unplaceable.
    if (random() >= 0.01) registry.heartbeat(nodeId(n), { timestamp, pools });
  }
  const cursor: RoundRobinCursor = { next: 0 };
  const us: number[] = [];
  const poolsUs: number[] = [];
  const outcomes: Record<string, number> = {};
  const leases = [];
  const warmup = Math.min(WARMUP, REGISTRY_DECISIONS);
  for (let i = 0; i < warmup + REGISTRY_DECISIONS; i++) {
    const n = Math.floor(random() * NODES);
    if (registry.nodeState(nodeId(n)) === 'online') {
      registry.heartbeat(nodeId(n), { timestamp, pools: Array.from({ length: POOLS_PER_NODE }, (_, p) => randomSnapshot(poolId(n, p))) });
    }
    const req = randomRequest();
    const t0 = process.hrtime.bigint();
    const views = registry.pools();
    const t1 = process.hrtime.bigint();
    const d = place(req, views, 'least-loaded', cursor);
    const t2 = process.hrtime.bigint();
    // Leases keep the local accounting moving, as dispatches do; released a little later.
    if (d.kind === 'assign') leases.push(registry.lease(d.candidate.node_id, d.candidate.pool_id));
    if (leases.length > 64) leases.shift()?.release();
    if (i < warmup) continue;
    us.push(Number(t2 - t0) / 1000);
    poolsUs.push(Number(t1 - t0) / 1000);
    outcomes[d.kind] = (outcomes[d.kind] ?? 0) + 1;
  }
  void registry.close();
  return { us: summarize(us), pools_us: summarize(poolsUs), outcomes };
}

const leastLoaded = benchPlace('least-loaded');
const roundRobin = benchPlace('round-robin');
const withRegistry = benchRegistry();
const indexed = benchPlace('least-loaded', true);
process.stdout.write(`${JSON.stringify({
  nodes: NODES,
  pools_per_node: POOLS_PER_NODE,
  candidates: NODES * POOLS_PER_NODE,
  models: MODELS,
  warmup: WARMUP,
  decisions: DECISIONS,
  registry_decisions: REGISTRY_DECISIONS,
  timer_overhead_us: timerOverheadUs(),
  place_least_loaded_us: leastLoaded.us,
  place_least_loaded_outcomes: leastLoaded.outcomes,
  place_round_robin_us: roundRobin.us,
  place_round_robin_outcomes: roundRobin.outcomes,
  registry_then_place_us: withRegistry.us,
  registry_pools_us: withRegistry.pools_us,
  registry_then_place_outcomes: withRegistry.outcomes,
  proposed_per_model_index_place_us: indexed.us,
  proposed_per_model_index_outcomes: indexed.outcomes,
  node: process.version,
})}\n`);
