import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import { BenchError } from '../errors.js';
import type { Daemon } from '../lib/daemon.js';
import {
  COLD_START_TIMEOUT_MS, SYNTHETIC_MODEL, newToken, poolStatus, startOrchestratord, startPoolManagerd, waitNodeIdle, waitPoolsReady,
} from '../lib/cluster.js';
import { profFlags, type Bench, type BenchContext } from '../lib/context.js';
import { startPassthroughProxy } from '../lib/fixture.js';
import { cpuSeconds } from '../lib/proc.js';
import type { BenchOutcome } from '../lib/result.js';
import { rounded, summarize } from '../lib/stats.js';
import { directBody, directGeneration, poolManagerdGeneration, relayGeneration, type TimedGeneration } from '../lib/streams.js';

const PROMPT = 'Once upon a time, in a data centre far away,';

function gaps(g: TimedGeneration): number[] {
  const out: number[] = [];
  for (let i = 1; i < g.tokenAt.length; i++) out.push((g.tokenAt[i] as number) - (g.tokenAt[i - 1] as number));
  return out;
}

/** Decode rate as the client sees it: token frames after the first over the time they took. */
function decodeRate(g: TimedGeneration): number {
  const n = g.tokenAt.length;
  if (n < 2) return Number.NaN;
  return (n - 1) / (((g.tokenAt[n - 1] as number) - (g.tokenAt[0] as number)) / 1000);
}

/** End-to-end rate: token frames over send → last token. */
function e2eRate(g: TimedGeneration): number {
  const n = g.tokenAt.length;
  return n / (((g.tokenAt[n - 1] as number) - g.sentAt) / 1000);
}

export const relayBench: Bench = {
  name: 'relay',
  title: 'Relay overhead (real llama-server)',
  targets: [
    { figure: 'ttft_added_p50', op: '<=', value: 1, unit: 'ms' },
    { figure: 'ttft_added_p99', op: '<=', value: 5, unit: 'ms' },
    { figure: 'itl_added_p99', op: '<=', value: 0.5, unit: 'ms' },
    { figure: 'tps_ratio', op: '>=', value: 0.99, unit: '×' },
  ],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const dir = ctx.dir;
    const token = newToken();
    const heartbeatMs = 1000;
    const orch = await startOrchestratord({ paths: ctx.paths, dir, token, heartbeatMs, nodeFlags: profFlags(ctx, 'relay-orchestratord') });
    const pm = await startPoolManagerd({
      paths: ctx.paths, dir, nodeId: 'relay-node', token, orchestratorUrl: orch.url, heartbeatMs,
      pools: [{ id: 'relay', slots: 1, determinism: true, threads: 1 }], nodeFlags: profFlags(ctx, 'relay-pool-managerd'),
    });
    const proxies: Daemon[] = [];
    try {
      ctx.log('relay: waiting for the pool (a cold cache builds llama-server first)');
      await waitPoolsReady(orch.url, token, ['relay'], [orch, pm.daemon], COLD_START_TIMEOUT_MS);
      const status = await poolStatus(pm, 'relay', token);
      const engineUrl = status?.engine_url;
      if (engineUrl === undefined) throw new BenchError('pool-managerd reports no engine_url for the ready pool');
      await waitNodeIdle(orch.url, token, 'relay-node', 10_000);
      // The floor: two bare node:http pass-through processes (FIXTURES) in the same places as the
      // two daemons, the inner one opening a connection per request like the adapter.
      const floorInner = await startPassthroughProxy(ctx.paths, dir, 'inner', engineUrl, 'close');
      proxies.push(floorInner);
      const floorOuter = await startPassthroughProxy(ctx.paths, dir, 'outer', floorInner.url, 'keepalive');
      proxies.push(floorOuter);

      const agent = new Agent({ connections: 4, keepAliveTimeout: 30_000 });
      const maxTokens = 128;
      const warmup = ctx.quick ? 3 : 10;
      const pairs = ctx.quick ? 20 : 200;
      const task = { orchUrl: orch.url, token, model: SYNTHETIC_MODEL, prompt: PROMPT, maxTokens, determinism: 'strict' as const };
      const direct: TimedGeneration[] = [];
      const relay: TimedGeneration[] = [];
      const viaPool: TimedGeneration[] = [];
      const floor: TimedGeneration[] = [];
      let mismatches = 0;
      ctx.log(`relay: ${warmup} warm-up + ${pairs} interleaved rounds of ${maxTokens}-token generations`);
      let cpuOrch0 = 0;
      let cpuPm0 = 0;
      for (let i = 0; i < warmup + pairs; i++) {
        if (i === warmup) {
          cpuOrch0 = cpuSeconds(orch.pid);
          cpuPm0 = cpuSeconds(pm.daemon.pid);
        }
        const seed = 1000 + i;
        // Rotate which variant goes first so none always follows another's engine work. The third
        // variant (pool-managerd's dispatch API alone) splits the added time between the two hops.
        const variants = ['direct', 'relay', 'pool', 'floor'];
        const order = variants.map((_, k) => variants[(i + k) % variants.length] as string);
        let d: TimedGeneration | undefined;
        let r: TimedGeneration | undefined;
        let pg: TimedGeneration | undefined;
        let fl: TimedGeneration | undefined;
        for (const v of order) {
          if (v === 'direct') d = await directGeneration(engineUrl, directBody(PROMPT, maxTokens, seed), agent);
          else if (v === 'floor') fl = await directGeneration(floorOuter.url, directBody(PROMPT, maxTokens, seed), agent, undefined, false);
          else if (v === 'pool') pg = await poolManagerdGeneration(pm.daemon.url, 'relay', token, { prompt: PROMPT, max_tokens: maxTokens, seed }, agent);
          else r = await relayGeneration({ ...task, seed }, agent);
          // The engine frees its slot just after the last event; the next request must not queue behind it.
          // A dispatch sent to pool-managerd directly holds a lease orchestratord does not know about:
          // its debounced (50 ms) heartbeats report the slot busy, then free again; wait for the latter.
          await sleep(v === 'pool' ? 80 : 10);
          await waitNodeIdle(orch.url, token, 'relay-node', 10_000);
        }
        if (d === undefined || r === undefined || pg === undefined || fl === undefined) throw new BenchError('round incomplete');
        if (i < warmup) continue;
        if (d.text !== r.text || d.text !== pg.text || d.text !== fl.text) mismatches += 1;
        direct.push(d);
        relay.push(r);
        viaPool.push(pg);
        floor.push(fl);
      }
      const cpuOrch = cpuSeconds(orch.pid) - cpuOrch0;
      const cpuPm = cpuSeconds(pm.daemon.pid) - cpuPm0;
      await agent.close();

      const ttftD = summarize(direct.map((g) => (g.tokenAt[0] as number) - g.sentAt));
      const ttftR = summarize(relay.map((g) => (g.tokenAt[0] as number) - g.sentAt));
      const ttftP = summarize(viaPool.map((g) => (g.tokenAt[0] as number) - g.sentAt));
      const ttftF = summarize(floor.map((g) => (g.tokenAt[0] as number) - g.sentAt));
      const itlF = summarize(floor.flatMap(gaps));
      const rateF = summarize(floor.map(decodeRate));
      const itlP = summarize(viaPool.flatMap(gaps));
      const itlD = summarize(direct.flatMap(gaps));
      const itlR = summarize(relay.flatMap(gaps));
      const pairedTtft = summarize(relay.map((r, i) => ((r.tokenAt[0] as number) - r.sentAt) - (((direct[i] as TimedGeneration).tokenAt[0] as number) - (direct[i] as TimedGeneration).sentAt)));
      const rateD = summarize(direct.map(decodeRate));
      const rateR = summarize(relay.map(decodeRate));
      const e2eD = summarize(direct.map(e2eRate));
      const e2eR = summarize(relay.map(e2eRate));
      const tokensD = summarize(direct.map((g) => g.tokenAt.length));
      const tokensR = summarize(relay.map((g) => g.tokenAt.length));
      return {
        method:
          `${pairs} rounds (after ${warmup} warm-up rounds) of the same greedy ${maxTokens}-token generation on one llama-server ` +
          '(synthetic model, 1 slot, 1 thread), rotating which variant goes first: direct = POST <engine_url>/completion with the ' +
          'body the adapter sends ({prompt, n_predict, stream, cache_prompt:false, seed, temperature:0}); relay = POST /v2/tasks ' +
          '(determinism strict, same seed) then GET the SSE stream immediately after the 202, through orchestratord → pool-managerd; ' +
          'pool-managerd alone = its POST /v2/pools/{id}/completions (NDJSON), to split the added time between the hops; ' +
          'floor = the direct request, over a kept connection like the relay\'s, through two FIXTURE processes that only pass bytes ' +
          'through (node:http, the inner one connecting per request like the adapter): what two Node hops cost on this machine at the least. ' +
          'TTFT = request send → arrival of the first token frame (relay: the clock starts before POST /v2/tasks, so admission, ' +
          'the SSE request and both hops count); inter-token = gaps between consecutive token frames at the client. ' +
          'Added = relay percentile − direct percentile. Tokens/s = (frames − 1) / (last − first frame) per generation, ' +
          'ratio of medians; the end-to-end rate (frames / (send → last frame)) is kept in the JSON.',
        samples: { rounds: pairs, 'token gaps per variant': itlD.n },
        figures: {
          ttft_added_p50: { label: 'added time to first token, p50', value: ttftR.p50 - ttftD.p50, unit: 'ms' },
          ttft_added_p99: { label: 'added time to first token, p99', value: ttftR.p99 - ttftD.p99, unit: 'ms' },
          itl_added_p50: { label: 'added inter-token latency, p50', value: itlR.p50 - itlD.p50, unit: 'ms' },
          itl_added_p99: { label: 'added inter-token latency, p99', value: itlR.p99 - itlD.p99, unit: 'ms' },
          tps_ratio: { label: 'tokens/s through the relay ÷ direct (median)', value: rateR.p50 / rateD.p50, unit: '×' },
          ttft_floor_p50: { label: 'floor: two bare pass-through processes (FIXTURE) instead of the daemons, added TTFT p50', value: ttftF.p50 - ttftD.p50, unit: 'ms' },
          ttft_pool_managerd_p50: { label: 'of which pool-managerd\'s hop alone (its dispatch API − direct), TTFT p50', value: ttftP.p50 - ttftD.p50, unit: 'ms' },
        },
        details: {
          ttft_ms: { direct: rounded(ttftD), via_pool_managerd_only: rounded(ttftP), relay: rounded(ttftR), floor_passthrough: rounded(ttftF), paired_difference: rounded(pairedTtft) },
          inter_token_ms: { direct: rounded(itlD, 4), via_pool_managerd_only: rounded(itlP, 4), relay: rounded(itlR, 4), floor_passthrough: rounded(itlF, 4) },
          decode_tokens_per_s: { direct: rounded(rateD, 1), relay: rounded(rateR, 1), floor_passthrough: rounded(rateF, 1) },
          end_to_end_tokens_per_s: { direct: rounded(e2eD, 1), relay: rounded(e2eR, 1), ratio_of_medians: e2eR.p50 / e2eD.p50 },
          token_frames_per_generation: { direct: tokensD, relay: tokensR },
          text_mismatches: mismatches,
          // CPU time of the daemons over the measured rounds per token they carried (pool-managerd carries
          // the relay and its own-API variants; orchestratord's figure also pays for the idle checks between variants).
          cpu_us_per_relayed_token: {
            orchestratord: (cpuOrch * 1e6) / relay.reduce((a, g) => a + g.tokenAt.length, 0),
            pool_managerd: (cpuPm * 1e6) / [...relay, ...viaPool].reduce((a, g) => a + g.tokenAt.length, 0),
          },
          engine_url: engineUrl,
          max_tokens: maxTokens,
        },
        notes: mismatches > 0 ? [`${mismatches} pair(s) produced different text through the relay than directly`] : [],
      };
    } finally {
      for (const p of proxies.reverse()) await p.stop();
      await pm.daemon.stop();
      await orch.stop();
    }
  },
};
