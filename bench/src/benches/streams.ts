import { setTimeout as sleep } from 'node:timers/promises';
import { BenchError } from '../errors.js';
import { newToken, startOrchestratord, waitPoolsReady } from '../lib/cluster.js';
import { profFlags, type Bench, type BenchContext } from '../lib/context.js';
import { startFixtureNode } from '../lib/fixture.js';
import { cpuSeconds, fdCount, nofileLimits, rssBytes } from '../lib/proc.js';
import type { BenchOutcome } from '../lib/result.js';
import { rounded, summarize } from '../lib/stats.js';
import { ClientHandle } from '../load/client-handle.js';
import type { ClientReply } from '../load/stream-client.js';

const MODEL = 'fixture:stream';
/** Slots per FIXTURE node: orchestratord keeps at most 256 connections per node origin. */
const SLOTS_PER_NODE = 250;
const CLIENTS = 4;
/**
 * One token per stream every 5 s: 10,000 streams then carry 2,000 tokens/s in aggregate. The figure
 * is about holding many streams while tokens flow; relay cost per token (µs of orchestratord CPU,
 * in the JSON) is what bounds the aggregate rate, and 2 cores also run the fixture and the clients.
 */
const TOKEN_INTERVAL_MS = 5000;

type Status = Extract<ClientReply, { type: 'status' }>;
type Measured = Extract<ClientReply, { type: 'measured' }>;

async function openOn(
  clients: readonly ClientHandle[],
  total: number,
  orchUrl: string,
  token: string,
): Promise<{ opened: number; failed: number; errors: string[]; ms: number }> {
  const per = Math.floor(total / clients.length);
  const replies = await Promise.all(
    clients.map((c, i) =>
      c.send({
        type: 'open',
        orchUrl,
        token,
        model: MODEL,
        count: i === clients.length - 1 ? total - per * (clients.length - 1) : per,
        maxTokens: 30_000,
        concurrency: 32,
      }),
    ),
  );
  const out = { opened: 0, failed: 0, errors: [] as string[], ms: 0 };
  for (const r of replies) {
    if (r.type !== 'opened') throw new BenchError(`unexpected reply ${r.type}`);
    out.opened += r.opened;
    out.failed += r.failed;
    out.errors.push(...r.errors);
    out.ms = Math.max(out.ms, r.ms);
  }
  return out;
}

async function status(clients: readonly ClientHandle[]): Promise<Omit<Status, 'type'>> {
  const all = (await Promise.all(clients.map((c) => c.send({ type: 'status' })))) as Status[];
  return all.reduce(
    (a, s) => ({
      alive: a.alive + s.alive,
      withTokens: a.withTokens + s.withTokens,
      ended: a.ended + s.ended,
      errored: a.errored + s.errored,
      tokens: a.tokens + s.tokens,
    }),
    { alive: 0, withTokens: 0, ended: 0, errored: 0, tokens: 0 },
  );
}

/** Waits until every live stream has received a token (or the time runs out). */
async function waitFlowing(clients: readonly ClientHandle[], timeoutMs: number): Promise<Omit<Status, 'type'>> {
  const deadline = performance.now() + timeoutMs;
  let s = await status(clients);
  while (s.withTokens < s.alive && performance.now() < deadline) {
    await sleep(250);
    s = await status(clients);
  }
  return s;
}

export const streamsBench: Bench = {
  name: 'streams',
  title: 'Concurrent SSE streams (FIXTURE engine nodes)',
  targets: [
    { figure: 'streams_held', op: '>=', value: 10_000, unit: 'streams' },
    { figure: 'rss_per_stream_kb', op: '<=', value: 30, unit: 'KB' },
    { figure: 'delay_p99', op: '<=', value: 10, unit: 'ms' },
  ],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const dir = ctx.dir;
    const target = Number(process.env.BENCH_STREAMS ?? (ctx.quick ? 1000 : 10_000));
    const limits = nofileLimits();
    const token = newToken();
    const orch = await startOrchestratord({
      paths: ctx.paths,
      dir,
      token,
      heartbeatMs: 1000,
      nofile: limits.hard,
      env: { ORCHD_ADMISSION_CAPACITY: String(target * 2) },
      nodeFlags: profFlags(ctx, 'streams-orchestratord'),
    });
    const nodes = Math.ceil((target * 1.05) / SLOTS_PER_NODE);
    const fixture = await startFixtureNode(
      ctx.paths,
      dir,
      {
        orchestratorUrl: orch.url,
        token,
        nodes,
        slotsPerPool: SLOTS_PER_NODE,
        model: MODEL,
        mode: 'stream',
        tokenIntervalMs: TOKEN_INTERVAL_MS,
        heartbeatMs: 1000,
        idPrefix: 'stream',
      },
      limits.hard,
    );
    const clients: ClientHandle[] = [];
    try {
      await waitPoolsReady(
        orch.url,
        token,
        Array.from({ length: nodes }, (_, i) => `stream-${i}`),
        [orch, fixture],
        60_000,
      );
      for (let i = 0; i < CLIENTS; i++) clients.push(new ClientHandle(ctx.paths.streamClient));

      // Warm-up: code paths JIT-compiled and pools connected before the baseline is read.
      ctx.log('streams: warm-up with 200 streams');
      const warm = await openOn(clients, 200, orch.url, token);
      if (warm.opened === 0) throw new BenchError(`no stream opened: ${warm.errors.join('; ')}`);
      await waitFlowing(clients, 5000);
      for (const c of clients) await c.close();
      clients.length = 0;
      await sleep(3000);
      const rss0 = rssBytes(orch.pid);
      const fd0 = fdCount(orch.pid);
      for (let i = 0; i < CLIENTS; i++) clients.push(new ClientHandle(ctx.paths.streamClient));

      ctx.log(
        `streams: opening ${target / 2} streams (${CLIENTS} client processes, ${nodes} fixture nodes × ${SLOTS_PER_NODE} slots)`,
      );
      const half = await openOn(clients, target / 2, orch.url, token);
      await waitFlowing(clients, 10_000);
      await sleep(2000);
      const rssHalf = rssBytes(orch.pid);
      const aliveHalf = (await status(clients)).alive;
      ctx.log(`streams: ${aliveHalf} alive; opening ${target / 2} more`);
      const rest = await openOn(clients, target / 2, orch.url, token);
      const flowing = await waitFlowing(clients, 20_000);
      await sleep(2000);
      const windowS = ctx.quick ? 10 : 30;
      ctx.log(
        `streams: ${flowing.alive} alive, ${flowing.withTokens} with tokens; measuring delivery for ${windowS} s`,
      );
      for (const c of clients) await c.send({ type: 'measure', on: true });
      const cpu0 = cpuSeconds(orch.pid);
      const w0 = performance.now();
      const rssSamples: number[] = [];
      while (performance.now() - w0 < windowS * 1000) {
        await sleep(1000);
        rssSamples.push(rssBytes(orch.pid));
      }
      const cpuS = cpuSeconds(orch.pid) - cpu0;
      const cpu = cpuS / ((performance.now() - w0) / 1000);
      const measured = (await Promise.all(clients.map((c) => c.send({ type: 'measure', on: false })))) as Measured[];
      const fdFull = fdCount(orch.pid);
      const delays = measured.flatMap((m) => m.delaysUs.map((us) => us / 1000));
      const held = measured.reduce((a, m) => a + m.alive, 0);
      const terminal: Record<string, number> = {};
      for (const m of measured) for (const [k, v] of Object.entries(m.terminal)) terminal[k] = (terminal[k] ?? 0) + v;
      const d = summarize(delays);
      const rssFull = summarize(rssSamples).p50;
      const perStream = (rssFull - rss0) / held;
      const slope = (rssFull - rssHalf) / Math.max(1, held - aliveHalf);
      const tokensPerS = delays.length / windowS;
      return {
        method:
          `One orchestratord (open-file limit ${limits.hard}, the hard limit here) relays ${target.toLocaleString('en-US')} ` +
          `tasks opened by ${CLIENTS} client processes (POST /v2/tasks, then one SSE connection per task). The tasks run on ` +
          `${nodes} FIXTURE nodes (one process, each node its own port and ${SLOTS_PER_NODE}-slot pool, registered and ` +
          'heartbeating like pool-managerd and speaking its NDJSON dispatch contract on an HTTP/1.1 port and an h2c port ' +
          'registered as dispatch_h2c, so orchestratord sends each node its first 8 streams over HTTP/1.1 (its default ' +
          'ORCHD_DISPATCH_HTTP1_PER_NODE) and multiplexes the rest over one HTTP/2 connection, as with pool-managerd) ' +
          'that send one token per stream every ' +
          `${TOKEN_INTERVAL_MS} ms at a random phase, the token text being the fixture's process.hrtime.bigint(). ` +
          `Streams held = streams still open and receiving tokens at the end of a ${windowS} s window; delivery delay = client ` +
          'arrival (hrtime) − fixture send time, every token in the window; RSS per stream = (median orchestratord VmRSS ' +
          'in the window − VmRSS after a 200-stream warm-up with no stream open) ÷ streams held.',
        samples: { 'tokens measured': delays.length, streams: held },
        figures: {
          streams_held: { label: 'streams held by one orchestratord', value: held, unit: 'streams' },
          rss_per_stream_kb: { label: 'orchestratord RSS per stream', value: perStream / 1024, unit: 'KB' },
          delay_p50: { label: 'fixture token → client frame, p50', value: d.p50, unit: 'ms' },
          delay_p99: { label: 'fixture token → client frame, p99', value: d.p99, unit: 'ms' },
          cpu_us_per_token: {
            label: 'orchestratord CPU per relayed token (window: heartbeats and keep-alives included)',
            value: (cpuS * 1e6) / Math.max(1, delays.length),
            unit: 'µs',
          },
        },
        details: {
          target_streams: target,
          nofile_limits: limits,
          opened: { first_half: half, second_half: rest },
          flowing_before_window: flowing,
          terminal_frames: terminal,
          delay_ms: rounded(d),
          tokens_per_s_relayed: Math.round(tokensPerS),
          orchestratord: {
            rss_bytes: { baseline: rss0, half: rssHalf, full_median: rssFull, window: summarize(rssSamples) },
            rss_slope_kb_per_stream_second_half: slope / 1024,
            fds: { baseline: fd0, full: fdFull },
            cpu_cores_used_in_window: cpu,
            cpu_us_per_relayed_token: (cpuS * 1e6) / Math.max(1, delays.length),
          },
        },
        notes:
          held < target && limits.hard < target + 64
            ? [`every stream holds one client socket in orchestratord; the hard open-file limit here is ${limits.hard}`]
            : [],
      };
    } finally {
      for (const c of clients) await c.close();
      await fixture.stop();
      await orch.stop();
    }
  },
};
