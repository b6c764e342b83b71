import { startRedisServer, type RedisServerHandle } from '@llama-orch/daemon-support/redis-server';
import { Agent } from 'undici';
import { COLD_START_TIMEOUT_MS, newToken, poolStatus, waitPoolsReady } from '../lib/cluster.js';
import type { Bench, BenchContext } from '../lib/context.js';
import { ensureNginx, nginxVersion } from '../lib/nginx.js';
import {
  fleetCpuSeconds,
  placements,
  startFleet,
  stopFleet,
  waitFleetIdle,
  VARIANT_SPEC,
  type Fleet,
} from '../lib/prefix-fleet.js';
import { cacheProbe, chatLoop, openLoop, warmedClosedLoop, warmUp } from '../lib/prefix-load.js';
import { prefixOutcome, type IdleCpu } from '../lib/prefix-report.js';
import {
  chatRound,
  tenantRound,
  summarizeLoad,
  CALIBRATION_ROUND,
  SATURATION_ROUND,
  TENANTS,
  type ChatTurnRecord,
  type PrefixRecord,
  type PrefixVariant,
} from '../lib/prefix-workload.js';
import type { BenchOutcome } from '../lib/result.js';
import { BenchError, ClusterNotReadyError, UsageError } from '../errors.js';

/**
 * `pnpm bench prefix` (issue 41): placement by prefix cache and load. Three (four) variants, each
 * with its own orchestratord and its own four nodes (one pool each, real llama-server whose host-RAM
 * prompt cache holds only a few of the tenants' long prompts), in interleaved blocks: least-loaded,
 * least-loaded with `user` (session affinity, today's workaround), cache-aware, and cache-aware
 * through three replicas on one redis-server behind nginx. Workload 1: eight tenants' long shared
 * system messages, Poisson arrivals at 70 % of the least-loaded fleet's measured capacity. Workload 2:
 * multi-turn conversations sent without session ids.
 */

const NODES = 4;
/** Share of the least-loaded fleet's closed-loop capacity that workload 1 offers. */
const LOAD_FACTOR = 0.7;
const CALIBRATION_CLIENTS = 4;
/**
 * Default `--cache-ram` (MiB): three of workload 1's ~2,070-token prompts (~2.05 MiB entries; the slot's prompt is saved, oldest
 * dropped, before a cached one is restored): 2 tenants per engine fit, 8 on every engine do not. Probed each run.
 */
const CACHE_RAM_MIB = 8;

function intOption(ctx: BenchContext, name: string, fallback: number): number {
  const v = ctx.options.get(name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`--${name} takes a whole number, not '${v}'`);
  return n;
}

export const prefixBench: Bench = {
  name: 'prefix',
  title:
    'Placement by prefix cache and load: least-loaded, session affinity, cache-aware (4 pools each, real llama-server)',
  targets: [
    { figure: 'ttft_p50_ratio', op: '>=', value: 2, unit: '×' },
    { figure: 'throughput_ratio', op: '>=', value: 1, unit: '×' },
    { figure: 'failed_where_least_loaded_served', op: '<=', value: 0, unit: 'requests' },
    { figure: 'cached_share_replicas_gap', op: '<=', value: 5, unit: 'points' },
  ],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const startedAt = performance.now();
    const cacheRamMiB = intOption(ctx, 'cache-ram', CACHE_RAM_MIB);
    const rounds = intOption(ctx, 'rounds', ctx.quick ? 1 : 6);
    const requests = intOption(ctx, 'requests', ctx.quick ? 32 : 56);
    const chatRounds = intOption(ctx, 'chat-rounds', ctx.quick ? 1 : 2);
    const withReplicas = intOption(ctx, 'replicas', ctx.quick ? 0 : 1) === 1;
    const calibrationRequests = intOption(ctx, 'calibration', ctx.quick ? 16 : 32);
    const saturationRequests = intOption(ctx, 'saturation', ctx.quick ? 16 : 40);
    const variants: PrefixVariant[] = ['least-loaded', 'affinity', 'cache-aware'];
    if (withReplicas) variants.push('cache-aware-3r');

    const token = newToken();
    const agent = new Agent({
      connections: 64,
      keepAliveTimeout: 30_000,
      headersTimeout: 120_000,
      bodyTimeout: 120_000,
    });
    let redis: RedisServerHandle | undefined;
    let nginxBin: string | undefined;
    const fleets = new Map<PrefixVariant, Fleet>();
    try {
      if (withReplicas) {
        redis = await startRedisServer();
        nginxBin = ensureNginx(ctx.log);
      }
      for (const variant of variants) {
        fleets.set(
          variant,
          await startFleet({
            ctx,
            token,
            variant,
            nodes: NODES,
            cacheRamMiB,
            ...(redis !== undefined ? { redisUrl: redis.url } : {}),
            ...(nginxBin !== undefined ? { nginxBin } : {}),
          }),
        );
      }
      ctx.log(`prefix: waiting for ${variants.length} × ${NODES} pools (--cache-ram ${cacheRamMiB} MiB each)`);
      for (const f of fleets.values())
        await waitPoolsReady(
          f.url,
          token,
          f.poolIds,
          [...f.orchestrators, ...f.nodes.map((n) => n.daemon)],
          COLD_START_TIMEOUT_MS,
        );
      const fleet = (v: PrefixVariant): Fleet => fleets.get(v) as Fleet;
      const target = (v: PrefixVariant) => ({ url: fleet(v).url, token, agent });

      // Every engine answers a few short requests first (its first requests are slower), alike on every fleet.
      for (const f of fleets.values()) await warmUp(target(f.variant), 2 * NODES);

      // How many workload-1 prompts one engine keeps: measured on an engine of the least-loaded fleet, directly.
      const ll = fleet('least-loaded');
      const probeNode = ll.nodes[0];
      const engineUrl =
        probeNode === undefined ? undefined : (await poolStatus(probeNode, ll.poolIds[0] as string, token))?.engine_url;
      if (engineUrl === undefined) throw new ClusterNotReadyError('prefix: no engine URL for the cache probe');
      await waitFleetIdle(ll, token);
      const probe = await cacheProbe(engineUrl, agent, ctx.quick ? 5 : 6);
      ctx.log(
        `prefix: cache probe: ${probe.map((s) => `${s.k} prompts → revisit ${s.hit ? 'hit' : 'miss'} (${s.cached_tokens}/${s.prompt_tokens})`).join(', ')}`,
      );

      // Capacity of the least-loaded fleet: a closed loop once every tenant was sent once, then the offered rate for every variant.
      await waitFleetIdle(ll, token);
      const calibration = await warmedClosedLoop(
        target('least-loaded'),
        tenantRound(CALIBRATION_ROUND, 1, TENANTS + calibrationRequests),
        'least-loaded',
        CALIBRATION_CLIENTS,
        false,
      );
      const cal = summarizeLoad(calibration, 'least-loaded');
      const capacity = cal.throughputPerS;
      if (!Number.isFinite(capacity) || capacity <= 0)
        throw new BenchError(`prefix: calibration completed ${cal.completed} of ${cal.sent} requests`);
      const rate = LOAD_FACTOR * capacity;
      ctx.log(
        `prefix: least-loaded capacity ${capacity.toFixed(2)} req/s (${cal.completed}/${cal.sent}, ${CALIBRATION_CLIENTS} clients); offering ${rate.toFixed(2)} req/s`,
      );

      const idle: IdleCpu[] = [];
      /** Runs one block on `variant` while measuring what the other fleets burn meanwhile. */
      const block = async <T>(variant: PrefixVariant, what: string, run: () => Promise<T>): Promise<T> => {
        await waitFleetIdle(fleet(variant), token);
        const others = [...fleets.values()].filter((f) => f.variant !== variant);
        const before = others.reduce((a, f) => a + fleetCpuSeconds(f), 0);
        const t0 = performance.now();
        const out = await run();
        const wallS = (performance.now() - t0) / 1000;
        const after = others.reduce((a, f) => a + fleetCpuSeconds(f), 0);
        idle.push({ variant, what, wall_s: wallS, others_cpu_s: after - before });
        return out;
      };

      const records: PrefixRecord[] = [];
      for (let round = 0; round < rounds; round++) {
        const w = tenantRound(round, rate, requests);
        for (const v of variants) {
          const rs = await block(v, `tenants round ${round}`, () => openLoop(target(v), w, v, VARIANT_SPEC[v].user));
          records.push(...rs);
          const ok = rs.filter((r) => r.ok);
          const share =
            ok.reduce((a, r) => a + r.cached_tokens, 0) /
            Math.max(
              1,
              ok.reduce((a, r) => a + r.prompt_tokens, 0),
            );
          ctx.log(
            `prefix: round ${round + 1}/${rounds} ${v}: ${ok.length}/${rs.length} ok, cached ${(share * 100).toFixed(0)} %`,
          );
        }
      }
      const turns: ChatTurnRecord[] = [];
      for (let round = 0; round < chatRounds; round++) {
        const w = chatRound(round);
        for (const v of variants) {
          const rs = await block(v, `chats round ${round}`, () => chatLoop(target(v), w, v, VARIANT_SPEC[v].user));
          turns.push(...rs);
          ctx.log(
            `prefix: chats ${round + 1}/${chatRounds} ${v}: ${rs.filter((r) => r.ok).length}/${rs.length} turns ok`,
          );
        }
      }

      // Saturated throughput of every variant: the calibration's closed loop again, fresh texts, same requests for all.
      const saturation: PrefixRecord[] = [];
      const sw = tenantRound(SATURATION_ROUND, 1, TENANTS + saturationRequests);
      for (const v of variants) {
        const rs = await block(v, 'saturation', () =>
          warmedClosedLoop(target(v), sw, v, CALIBRATION_CLIENTS, VARIANT_SPEC[v].user),
        );
        saturation.push(...rs);
        ctx.log(`prefix: saturation ${v}: ${summarizeLoad(rs, v).throughputPerS.toFixed(2)} req/s`);
      }

      for (const f of fleets.values()) {
        const placed = placements(f);
        for (const r of [...records, ...turns, ...saturation, ...(f.variant === 'least-loaded' ? calibration : [])]) {
          if (r.variant !== f.variant) continue;
          const p = placed.get(r.correlation_id);
          if (p === undefined) continue;
          r.pool_id = p.pool;
          r.reason = p.reason;
          if (f.replicaNames.length > 1 && 'index' in r) r.replica = p.replica;
        }
      }
      return prefixOutcome({
        variants,
        nodes: NODES,
        cacheRamMiB,
        loadFactor: LOAD_FACTOR,
        rounds,
        requests,
        chatRounds,
        capacity,
        rate,
        calibration,
        saturation,
        calibrationClients: CALIBRATION_CLIENTS,
        probe,
        records,
        turns,
        idle,
        nginx: nginxBin === undefined ? undefined : nginxVersion(nginxBin),
        wallS: (performance.now() - startedAt) / 1000,
      });
    } finally {
      await agent.close();
      for (const f of fleets.values()) await stopFleet(f);
      await redis?.stop();
    }
  },
};
