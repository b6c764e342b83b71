import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { BenchError } from '../errors.js';
import {
  COLD_START_TIMEOUT_MS,
  SYNTHETIC_MODEL,
  newToken,
  poolStatus,
  startOrchestratord,
  startPoolManagerd,
  waitNodeIdle,
  waitPoolsReady,
} from '../lib/cluster.js';
import { profFlags, type Bench, type BenchContext } from '../lib/context.js';
import { engineBusy, waitEngineIdle } from '../lib/engine.js';
import type { BenchOutcome } from '../lib/result.js';
import { rounded, summarize } from '../lib/stats.js';
import { SseParser } from '../lib/sse.js';
import { directBody, relayGeneration } from '../lib/streams.js';

const PROMPT = 'Tell me a very long story about a lighthouse keeper.';
const DISCONNECT_AFTER_TOKENS = 3;
const POLL_MS = 2;

/** Direct variant: stream from the engine, drop the socket after a few content events. Returns the drop time. */
async function directDisconnect(engineUrl: string, body: Record<string, unknown>, dispatcher: Agent): Promise<number> {
  const ac = new AbortController();
  const res = await request(`${engineUrl}/completion`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    dispatcher,
    reset: true,
    signal: ac.signal,
  });
  const parser = new SseParser();
  let seen = 0;
  try {
    for await (const chunk of res.body) {
      for (const f of parser.feed((chunk as Buffer).toString('utf8'))) {
        const ev = JSON.parse(f.data) as { content?: string; stop?: boolean };
        if (ev.stop === true) throw new BenchError('generation ended before the disconnect');
        if (ev.content !== undefined && ev.content !== '') seen += 1;
        if (seen >= DISCONNECT_AFTER_TOKENS) {
          const at = performance.now();
          ac.abort();
          return at;
        }
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  }
  throw new BenchError('engine stream ended before the disconnect');
}

/**
 * pool-managerd variant: its dispatch route (`POST /v2/pools/{id}/completions`, NDJSON, what
 * orchestratord sends), dropped after a few token events. Returns the drop time.
 */
async function dispatchDisconnect(
  pmUrl: string,
  poolId: string,
  token: string,
  body: { prompt: string; max_tokens: number; seed: number },
  dispatcher: Agent,
): Promise<number> {
  const ac = new AbortController();
  const res = await request(`${pmUrl}/v2/pools/${encodeURIComponent(poolId)}/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, accept: 'application/x-ndjson' },
    body: JSON.stringify({ task_id: randomUUID(), greedy: true, ...body }),
    dispatcher,
    reset: true,
    signal: ac.signal,
  });
  if (res.statusCode !== 200)
    throw new BenchError(`pool-managerd answered ${res.statusCode}: ${await res.body.text()}`);
  let seen = 0;
  let buf = '';
  try {
    for await (const chunk of res.body) {
      buf += (chunk as Buffer).toString('utf8');
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim() === '') continue;
        const ev = JSON.parse(line) as { type: string };
        if (ev.type !== 'token') throw new BenchError(`dispatch ended (${ev.type}) before the disconnect`);
        if (++seen >= DISCONNECT_AFTER_TOKENS) {
          const at = performance.now();
          ac.abort();
          return at;
        }
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  }
  throw new BenchError('dispatch stream ended before the disconnect');
}

type Variant = 'relay' | 'dispatch' | 'direct';
/** Orders rotated per round, so no variant always runs right after the same one. */
const ORDERS: readonly (readonly Variant[])[] = [
  ['relay', 'dispatch', 'direct'],
  ['dispatch', 'direct', 'relay'],
  ['direct', 'relay', 'dispatch'],
];

export const cancelBench: Bench = {
  name: 'cancel',
  title: 'Cancel latency (client disconnect → engine slot idle)',
  // dispatch_p50: a benchmark target (median ≤ 100 ms), not a timed test: pool-managerd's tests allow a generous 2 s.
  targets: [
    { figure: 'relay_p99', op: '<=', value: 100, unit: 'ms' },
    { figure: 'dispatch_p50', op: '<=', value: 100, unit: 'ms' },
  ],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const dir = ctx.dir;
    const token = newToken();
    const heartbeatMs = 1000;
    const orch = await startOrchestratord({
      paths: ctx.paths,
      dir,
      token,
      heartbeatMs,
      nodeFlags: profFlags(ctx, 'cancel-orchestratord'),
    });
    const pm = await startPoolManagerd({
      paths: ctx.paths,
      dir,
      nodeId: 'cancel-node',
      token,
      orchestratorUrl: orch.url,
      heartbeatMs,
      pools: [{ id: 'cancel', slots: 1, ctx: 4096, determinism: true, threads: 1 }],
      nodeFlags: profFlags(ctx, 'cancel-pool-managerd'),
    });
    try {
      ctx.log('cancel: waiting for the pool');
      await waitPoolsReady(orch.url, token, ['cancel'], [orch, pm.daemon], COLD_START_TIMEOUT_MS);
      const engineUrl = (await poolStatus(pm, 'cancel', token))?.engine_url;
      if (engineUrl === undefined) throw new BenchError('no engine_url');
      const agent = new Agent({ connections: 8, keepAliveTimeout: 30_000 });
      const poller = new Agent({ connections: 1, keepAliveTimeout: 30_000 });
      const maxTokens = 3000;
      const samples = ctx.quick ? 10 : 100;
      const relay: number[] = [];
      const dispatched: number[] = [];
      const direct: number[] = [];
      let busyAtDisconnect = 0;
      ctx.log(
        `cancel: ${samples} interleaved rounds (relay, pool-managerd dispatch and direct engine disconnect), /slots polled every ${POLL_MS} ms`,
      );
      for (let i = 0; i < samples + 2; i++) {
        for (const variant of ORDERS[i % ORDERS.length]!) {
          await waitNodeIdle(orch.url, token, 'cancel-node', 10_000);
          if (Number.isNaN(await waitEngineIdle(engineUrl, poller, 5, 10_000)))
            throw new BenchError('engine stayed busy');
          let droppedAt: number;
          if (variant === 'relay') {
            let tokens = 0;
            const g = await relayGeneration(
              {
                orchUrl: orch.url,
                token,
                model: SYNTHETIC_MODEL,
                prompt: PROMPT,
                maxTokens,
                seed: i,
                determinism: 'strict',
              },
              agent,
              (f) => (f.event === 'token' && ++tokens >= DISCONNECT_AFTER_TOKENS ? 'disconnect' : undefined),
            );
            if (g.disconnectedAt === undefined) throw new BenchError('relay stream ended before the disconnect');
            droppedAt = g.disconnectedAt;
          } else if (variant === 'dispatch') {
            droppedAt = await dispatchDisconnect(
              pm.daemon.url,
              'cancel',
              token,
              { prompt: PROMPT, max_tokens: maxTokens, seed: i },
              agent,
            );
          } else {
            droppedAt = await directDisconnect(engineUrl, directBody(PROMPT, maxTokens, i), agent);
          }
          // The first poll is also the check that the slot was still generating when we left.
          const busyNow = await engineBusy(engineUrl, poller);
          const idleAt = busyNow ? await waitEngineIdle(engineUrl, poller, POLL_MS, 5000) : performance.now();
          if (busyNow) busyAtDisconnect += 1;
          if (Number.isNaN(idleAt)) throw new BenchError(`${variant}: engine slot still busy 5 s after the disconnect`);
          if (i < 2) continue;
          (variant === 'relay' ? relay : variant === 'dispatch' ? dispatched : direct).push(idleAt - droppedAt);
        }
        await sleep(10);
      }
      await agent.close();
      await poller.close();
      const r = summarize(relay);
      const p = summarize(dispatched);
      const d = summarize(direct);
      return {
        method:
          `${samples} rounds of three, interleaved (order rotated): relay = POST /v2/tasks + SSE through orchestratord → ` +
          `pool-managerd → llama-server (synthetic model, 1 slot, max_tokens ${maxTokens}); dispatch = pool-managerd's ` +
          'POST /v2/pools/{id}/completions (NDJSON) alone; direct = POST <engine_url>/completion. After the ' +
          `${DISCONNECT_AFTER_TOKENS}rd token the client drops its connection (t0); GET <engine_url>/slots is then polled ` +
          `every ${POLL_MS} ms until no slot is processing (t1, completion of that poll). Latency = t1 − t0. Before each sample ` +
          'the engine is idle and orchestratord shows the slot free. The generation would run for seconds, so an idle slot ' +
          'means the cancel reached the engine.',
        samples: { relay: r.n, dispatch: p.n, direct: d.n },
        figures: {
          relay_p50: { label: 'relay: disconnect → slot idle, p50', value: r.p50, unit: 'ms' },
          relay_p99: { label: 'relay: disconnect → slot idle, p99', value: r.p99, unit: 'ms' },
          dispatch_p50: { label: 'pool-managerd dispatch: disconnect → slot idle, p50', value: p.p50, unit: 'ms' },
          dispatch_p99: { label: 'pool-managerd dispatch: disconnect → slot idle, p99', value: p.p99, unit: 'ms' },
          added_p50: { label: 'added vs direct engine disconnect, p50', value: r.p50 - d.p50, unit: 'ms' },
        },
        details: {
          relay_ms: rounded(r),
          dispatch_ms: rounded(p),
          direct_ms: rounded(d),
          slot_busy_at_first_poll: busyAtDisconnect,
          poll_interval_ms: POLL_MS,
        },
      };
    } finally {
      await pm.daemon.stop();
      await orch.stop();
    }
  },
};
