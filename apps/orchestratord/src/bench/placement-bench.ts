#!/usr/bin/env node
import type { PoolSnapshot } from '@llama-orch/contracts';
import { pino } from 'pino';
import { NodeRegistry } from '../registry/node-registry.js';
import type { Lease, PoolCandidate } from '../registry/pool-view.js';
import { Registry } from 'prom-client';
import {
  place,
  type PlacementRequest,
  type PlacementStrategy,
  type RoundRobinCursor,
} from '../scheduling/placement.js';
import { PrefixRouting } from '../prefix/prefix-routing.js';
import { BLOCK_CHARS, promptBlocks, type PromptBlocks } from '../prefix/prompt-blocks.js';
import { LocalPrefixShare } from '../store/prefix-share.js';
import { createMetrics } from '../support/metrics.js';

/**
 * Placement at scale, for `pnpm bench placement` (bench/ spawns this file: it may not import
 * orchestratord, so the measurement lives next to the code it measures). Prints one JSON object.
 *
 * A real NodeRegistry of `NODES` nodes × `POOLS_PER_NODE` pools, registered and heartbeating with
 * seeded random load (slots, free slots, states, models, determinism, ctx), and a stream of random
 * tasks (model, ctx, strict determinism, prefer/pin overrides, half with a session's last pool). Each measured call is timed alone
 * with `process.hrtime.bigint()`. Between calls, untimed, the cluster keeps moving: one random node
 * heartbeats new random load for its pools, leases taken by earlier assignments are released (64
 * held at a time) and 1 % of the time a random pool is marked saturated (a 503), as dispatches do.
 *   - `decision_*`: `place(req, registry, strategy, cursor)`, the call the scheduler's `pump()`
 *     makes per queued task: the registry's per-model index lookup (and its saturation-expiry
 *     check) plus the pass over the model's pools;
 *   - `pump_step`: that decision and, when it assigns, `registry.lease()` (which rebuilds the
 *     pool's view and updates the index): the synchronous work of one pump iteration for one task;
 *   - `registry_pools`: `registry.pools()`, the copy of every view that admission and the queue's
 *     metrics frames still take;
 *   - `flat_place`: `place()` over every pool as a plain array (no index), for reference;
 *   - `decision_cache_aware`: the decision under `cache-aware` with a live prefix index, and
 *     `prefix_placed` the index's work once it assigns (`PrefixRouting.placed`: the pool now holds
 *     the prompt): tasks carry one of `PREFIXES` shared prefixes of 32 blocks and 4 of their own;
 *   - `prompt_blocks`: hashing one such prompt (36 blocks, ~9 KiB of text), once per task.
 */

const NODES = Number(process.env.PLACEMENT_NODES ?? 1000);
const POOLS_PER_NODE = Number(process.env.PLACEMENT_POOLS_PER_NODE ?? 4);
const MODELS = Number(process.env.PLACEMENT_MODELS ?? 16);
const WARMUP = Number(process.env.PLACEMENT_WARMUP ?? 2000);
const DECISIONS = Number(process.env.PLACEMENT_DECISIONS ?? 20_000);
/** Samples of the `registry.pools()` and flat-array variants. */
const REGISTRY_DECISIONS = Number(process.env.PLACEMENT_REGISTRY_DECISIONS ?? 3000);
const HELD_LEASES = 64;
/** Share of tasks that continue a conversation (carry their session's last pool). */
const AFFINITY_SHARE = Number(process.env.PLACEMENT_AFFINITY_SHARE ?? 0.5);

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

const nodeId = (n: number): string => `node-${String(n).padStart(4, '0')}`;
const poolId = (n: number, p: number): string => `n${n}-p${p}`;

function randomRequest(): PlacementRequest {
  const r = random();
  return {
    model_ref: model(Math.floor(random() * MODELS)),
    ctx: pick([0, 0, 1024, 4096]),
    determinism: random() < 0.2 ? 'strict' : undefined,
    placement:
      r < 0.8
        ? undefined
        : r < 0.9
          ? {
              mode: 'prefer',
              prefer_pools: [poolId(Math.floor(random() * NODES), 0), poolId(Math.floor(random() * NODES), 1)],
              allow_fallback: true,
            }
          : {
              mode: 'pin',
              pin_pool_id: poolId(Math.floor(random() * NODES), Math.floor(random() * POOLS_PER_NODE)),
              allow_fallback: false,
            },
    // The scheduler always passes the task's (normally empty) exclusion set.
    exclude: new Set<string>(),
    // Half the tasks continue a conversation: their session's last pool (any pool; often not the model's).
    affinity: affinity(),
  };
}

/** Draws the same numbers whatever the share, so runs with different shares see the same cluster. */
function affinity(): PlacementRequest['affinity'] {
  const take = random() < AFFINITY_SHARE;
  const n = Math.floor(random() * NODES);
  const p = Math.floor(random() * POOLS_PER_NODE);
  return take ? { node_id: nodeId(n), pool_id: poolId(n, p) } : undefined;
}

interface Summary {
  n: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

function summarize(values: number[]): Summary {
  const s = [...values].sort((a, b) => a - b);
  const at = (p: number): number =>
    s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] as number;
  const r = (v: number): number => Math.round(v * 1000) / 1000;
  return {
    n: s.length,
    min: r(s[0] ?? NaN),
    p50: r(at(50)),
    p90: r(at(90)),
    p99: r(at(99)),
    max: r(s[s.length - 1] ?? NaN),
    mean: r(s.reduce((a, b) => a + b, 0) / s.length),
  };
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

/** A registered, heartbeating cluster, and the untimed churn applied between measured calls. */
class Cluster {
  readonly registry = new NodeRegistry({
    heartbeatIntervalMs: 600_000,
    clock: { now: () => Date.now() },
    logger: pino({ level: 'silent' }),
  });
  readonly #timestamp = new Date().toISOString();
  readonly #leases: Lease[] = [];

  constructor() {
    for (let n = 0; n < NODES; n++) {
      const pools = Array.from({ length: POOLS_PER_NODE }, (_, p) => randomSnapshot(poolId(n, p)));
      this.registry.register({
        node_id: nodeId(n),
        machine_id: `m${n}`,
        address: `http://10.0.${n >> 8}.${n & 255}:9200`,
        pools,
        capabilities: { gpus: [], cpu_cores: 16, ram_total_bytes: 64 * 2 ** 30 },
        version: 'bench',
      });
      // 1 % of nodes never heartbeat: they stay `registering` and unplaceable.
      if (random() >= 0.01) this.registry.heartbeat(nodeId(n), { timestamp: this.#timestamp, pools });
    }
  }

  churn(): void {
    const n = Math.floor(random() * NODES);
    if (this.registry.nodeState(nodeId(n)) === 'online') {
      this.registry.heartbeat(nodeId(n), {
        timestamp: this.#timestamp,
        pools: Array.from({ length: POOLS_PER_NODE }, (_, p) => randomSnapshot(poolId(n, p))),
      });
    }
    if (random() < 0.01)
      this.registry.markSaturated(
        nodeId(Math.floor(random() * NODES)),
        poolId(n, Math.floor(random() * POOLS_PER_NODE)),
      );
    while (this.#leases.length > HELD_LEASES) this.#leases.shift()?.release();
  }

  /** Leases keep the local accounting moving, as dispatches do; released a little later by churn(). */
  hold(lease: Lease): void {
    this.#leases.push(lease);
  }

  close(): void {
    for (const l of this.#leases.splice(0)) l.release();
    void this.registry.close();
  }
}

interface Measured {
  us: Summary;
  outcomes: Record<string, number>;
  /** cache-aware: the index's update after an assignment. */
  updates?: Summary;
}

/** `withLease`: also time the lease an assignment takes (the pump step); otherwise lease untimed. */
function benchDecision(cluster: Cluster, strategy: PlacementStrategy, withLease: boolean): Measured {
  const cursor: RoundRobinCursor = { next: 0 };
  const us: number[] = [];
  const outcomes: Record<string, number> = {};
  for (let i = 0; i < WARMUP + DECISIONS; i++) {
    cluster.churn();
    const req = randomRequest();
    let lease: Lease | undefined;
    const t0 = process.hrtime.bigint();
    const d = place(req, cluster.registry, strategy, cursor);
    if (withLease && d.kind === 'assign') lease = cluster.registry.lease(d.candidate.node_id, d.candidate.pool_id);
    const t1 = process.hrtime.bigint();
    if (!withLease && d.kind === 'assign') lease = cluster.registry.lease(d.candidate.node_id, d.candidate.pool_id);
    if (lease !== undefined) cluster.hold(lease);
    if (i < WARMUP) continue;
    us.push(Number(t1 - t0) / 1000);
    outcomes[d.kind] = (outcomes[d.kind] ?? 0) + 1;
  }
  return { us: summarize(us), outcomes };
}

function benchPools(cluster: Cluster): Summary {
  const us: number[] = [];
  const warmup = Math.min(WARMUP, REGISTRY_DECISIONS);
  let sink = 0;
  for (let i = 0; i < warmup + REGISTRY_DECISIONS; i++) {
    cluster.churn();
    const t0 = process.hrtime.bigint();
    const views = cluster.registry.pools();
    const t1 = process.hrtime.bigint();
    sink += views.length;
    if (i >= warmup) us.push(Number(t1 - t0) / 1000);
  }
  if (sink < 0) process.stderr.write('unreachable\n');
  return summarize(us);
}

/** place() over every pool as a plain array (taken from the registry untimed): no index. */
function benchFlat(cluster: Cluster): Measured {
  const cursor: RoundRobinCursor = { next: 0 };
  const us: number[] = [];
  const outcomes: Record<string, number> = {};
  const warmup = Math.min(WARMUP, REGISTRY_DECISIONS);
  for (let i = 0; i < warmup + REGISTRY_DECISIONS; i++) {
    cluster.churn();
    const all: readonly PoolCandidate[] = cluster.registry.pools();
    const req = randomRequest();
    const t0 = process.hrtime.bigint();
    const d = place(req, all, 'least-loaded', cursor);
    const t1 = process.hrtime.bigint();
    if (d.kind === 'assign') cluster.hold(cluster.registry.lease(d.candidate.node_id, d.candidate.pool_id));
    if (i < warmup) continue;
    us.push(Number(t1 - t0) / 1000);
    outcomes[d.kind] = (outcomes[d.kind] ?? 0) + 1;
  }
  return { us: summarize(us), outcomes };
}

const PREFIXES = Number(process.env.PLACEMENT_PREFIXES ?? 256);
const SHARED_BLOCKS = 32;

/** A task's prompt: shared prefix `p` (a tenant's system prompt) and a question of its own. */
function promptOf(p: number, own: number): string {
  const shared = `tenant ${p} handbook `
    .repeat(Math.ceil((SHARED_BLOCKS * BLOCK_CHARS) / 20))
    .slice(0, SHARED_BLOCKS * BLOCK_CHARS);
  return shared + `question ${own} `.repeat(Math.ceil((4 * BLOCK_CHARS) / 12)).slice(0, 4 * BLOCK_CHARS);
}

/** Blocks of a few thousand prompts, hashed ahead (untimed), drawn from at random. */
function promptPool(): PromptBlocks[] {
  return Array.from({ length: 4096 }, (_, i) =>
    promptBlocks({ workload: 'completion', prompt: promptOf(i % PREFIXES, i) })!,
  );
}

function benchCacheAware(cluster: Cluster): Measured {
  const routing = new PrefixRouting({
    share: new LocalPrefixShare(),
    replicaId: 'bench',
    metrics: createMetrics(new Registry(), {} as never),
    registry: cluster.registry,
  });
  const prompts = promptPool();
  const cursor: RoundRobinCursor = { next: 0 };
  const us: number[] = [];
  const updates: number[] = [];
  const outcomes: Record<string, number> = {};
  for (let i = 0; i < WARMUP + DECISIONS; i++) {
    cluster.churn();
    const req: PlacementRequest = { ...randomRequest(), blocks: pick(prompts) };
    const t0 = process.hrtime.bigint();
    const d = place(req, cluster.registry, 'cache-aware', cursor, routing);
    const t1 = process.hrtime.bigint();
    if (d.kind === 'assign') routing.placed(req.blocks, d.candidate);
    const t2 = process.hrtime.bigint();
    if (d.kind === 'assign') cluster.hold(cluster.registry.lease(d.candidate.node_id, d.candidate.pool_id));
    if (i < WARMUP) continue;
    us.push(Number(t1 - t0) / 1000);
    if (d.kind === 'assign') updates.push(Number(t2 - t1) / 1000);
    const key = d.kind === 'assign' ? d.reason : d.kind;
    outcomes[key] = (outcomes[key] ?? 0) + 1;
  }
  routing.close();
  return { us: summarize(us), outcomes, updates: summarize(updates) };
}

function benchHashing(): Summary {
  const us: number[] = [];
  const warmup = Math.min(WARMUP, REGISTRY_DECISIONS);
  let sink = 0;
  for (let i = 0; i < warmup + REGISTRY_DECISIONS; i++) {
    const prompt = promptOf(i % PREFIXES, i);
    const t0 = process.hrtime.bigint();
    const blocks = promptBlocks({ workload: 'completion', prompt });
    const t1 = process.hrtime.bigint();
    sink += blocks?.hashes.length ?? 0;
    if (i >= warmup) us.push(Number(t1 - t0) / 1000);
  }
  if (sink < 0) process.stderr.write('unreachable\n');
  return summarize(us);
}

const cluster = new Cluster();
const modelPools = Array.from({ length: MODELS }, (_, m) => cluster.registry.poolsForModel(model(m)).length);
const leastLoaded = benchDecision(cluster, 'least-loaded', false);
const roundRobin = benchDecision(cluster, 'round-robin', false);
const pumpStep = benchDecision(cluster, 'least-loaded', true);
const poolsCopy = benchPools(cluster);
const flat = benchFlat(cluster);
const cacheAware = benchCacheAware(cluster);
const hashing = benchHashing();
cluster.close();
process.stdout.write(
  `${JSON.stringify({
    nodes: NODES,
    pools_per_node: POOLS_PER_NODE,
    affinity_share: AFFINITY_SHARE,
    candidates: NODES * POOLS_PER_NODE,
    models: MODELS,
    pools_per_model: { min: Math.min(...modelPools), max: Math.max(...modelPools) },
    warmup: WARMUP,
    decisions: DECISIONS,
    registry_decisions: REGISTRY_DECISIONS,
    timer_overhead_us: timerOverheadUs(),
    decision_least_loaded_us: leastLoaded.us,
    decision_least_loaded_outcomes: leastLoaded.outcomes,
    decision_round_robin_us: roundRobin.us,
    decision_round_robin_outcomes: roundRobin.outcomes,
    pump_step_us: pumpStep.us,
    pump_step_outcomes: pumpStep.outcomes,
    registry_pools_us: poolsCopy,
    flat_place_us: flat.us,
    flat_place_outcomes: flat.outcomes,
    prefixes: PREFIXES,
    decision_cache_aware_us: cacheAware.us,
    decision_cache_aware_outcomes: cacheAware.outcomes,
    prefix_placed_us: cacheAware.updates,
    prompt_blocks_us: hashing,
    node: process.version,
  })}\n`,
);
