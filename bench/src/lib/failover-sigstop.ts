import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import {
  COLD_START_TIMEOUT_MS,
  SYNTHETIC_MODEL,
  newToken,
  startOrchestratord,
  startPoolManagerd,
  waitNodeIdle,
  waitPoolsReady,
} from './cluster.js';
import { profFlags, type BenchContext } from './context.js';
import { httpJson } from './http.js';
import type { BenchOutcome } from './result.js';
import { rounded, summarize } from './stats.js';
import { relayGeneration } from './streams.js';

interface Trial {
  /** SIGSTOP → orchestratord marked the node offline (its `state_since`), ms. */
  offlineMs: number;
  /** SIGSTOP → a GET /v2/nodes poll (every 5 ms) first showed it offline, ms. */
  offlineSeenMs: number;
  /** SIGSTOP → first token of the task sent towards the stopped node, ms (NaN: never within the wait). */
  startElsewhereMs: number;
  /** Node that finally served the task. */
  servedBy: string | undefined;
  outcome: string;
}

/**
 * The failover benchmark's first part: SIGSTOP a pool-managerd, time the node going
 * offline and its task's first token on the other node. Its own heartbeat (500 ms), unchanged since.
 */
export async function sigstopTrials(ctx: BenchContext): Promise<BenchOutcome> {
  const dir = ctx.dir;
  const token = newToken();
  const heartbeatMs = 500;
  const orch = await startOrchestratord({
    paths: ctx.paths,
    dir,
    token,
    heartbeatMs,
    nodeFlags: profFlags(ctx, 'failover-orchestratord'),
  });
  const pools = [{ id: 'fa', slots: 1, determinism: true, threads: 1 }];
  const a = await startPoolManagerd({
    paths: ctx.paths,
    dir,
    nodeId: 'node-a',
    token,
    orchestratorUrl: orch.url,
    heartbeatMs,
    pools,
    nodeFlags: profFlags(ctx, 'failover-node-a'),
  });
  const b = await startPoolManagerd({
    paths: ctx.paths,
    dir,
    nodeId: 'node-b',
    token,
    orchestratorUrl: orch.url,
    heartbeatMs,
    pools: [{ ...pools[0], id: 'fb' }],
  });
  const agent = new Agent({ connections: 8 });
  try {
    ctx.log('failover: waiting for both pools');
    await waitPoolsReady(orch.url, token, ['fa', 'fb'], [orch, a.daemon, b.daemon], COLD_START_TIMEOUT_MS);
    const trials: Trial[] = [];
    const count = ctx.quick ? 2 : 12;
    const waitLimitMs = 10 * heartbeatMs;
    ctx.log(`failover: ${count} trials, heartbeat ${heartbeatMs} ms; each SIGSTOPs node-a at a random heartbeat phase`);
    for (let t = 0; t < count; t++) {
      await waitNodeIdle(orch.url, token, 'node-a', 20_000);
      await waitNodeIdle(orch.url, token, 'node-b', 20_000);
      await sleep(Math.random() * heartbeatMs);
      const stoppedAt = performance.now();
      const stoppedEpoch = performance.timeOrigin + stoppedAt;
      a.daemon.signal('SIGSTOP');
      // A task that prefers node-a's pool: placement still sees node-a online with a free slot.
      const task = relayGeneration(
        {
          orchUrl: orch.url,
          token,
          model: SYNTHETIC_MODEL,
          prompt: 'Failover probe.',
          maxTokens: 8,
          seed: t,
          deadlineMs: 60_000,
          placement: { mode: 'prefer', prefer_pools: ['fa'], allow_fallback: true },
        },
        agent,
      ).then(
        (g) => ({ firstToken: g.tokenAt[0], end: g.frames.at(-1) }),
        (err: unknown) => ({
          firstToken: undefined,
          end: {
            event: 'client-error',
            data: { message: String(err) } as Record<string, unknown>,
            at: performance.now(),
          },
        }),
      );
      let offlineAt = Number.NaN;
      let offlineSince = Number.NaN;
      while (performance.now() - stoppedAt < waitLimitMs) {
        const r = await httpJson<{ nodes: Array<{ node_id: string; state: string; state_since: string }> }>(
          'GET',
          `${orch.url}/v2/nodes`,
          { token, dispatcher: agent },
        );
        const node = r.body.nodes.find((n) => n.node_id === 'node-a');
        if (node?.state === 'offline') {
          offlineAt = performance.now();
          offlineSince = Date.parse(node.state_since);
          break;
        }
        await sleep(5);
      }
      const settled = await Promise.race([
        task,
        sleep(Math.max(0, stoppedAt + waitLimitMs - performance.now())).then(() => undefined),
      ]);
      a.daemon.signal('SIGCONT');
      const result = settled ?? (await task);
      const end = result.end;
      trials.push({
        offlineMs: offlineSince - stoppedEpoch,
        offlineSeenMs: offlineAt - stoppedAt,
        startElsewhereMs:
          settled !== undefined && result.firstToken !== undefined ? result.firstToken - stoppedAt : Number.NaN,
        servedBy: end?.event === 'end' ? String(end.data.node_id) : undefined,
        outcome: end === undefined ? 'none' : end.event === 'error' ? `error ${String(end.data.code)}` : end.event,
      });
      ctx.log(
        `failover: trial ${t + 1}: offline after ${Math.round(offlineSince - stoppedEpoch)} ms (seen at ${Math.round(offlineAt - stoppedAt)} ms), task ${trials.at(-1)?.outcome} on ${trials.at(-1)?.servedBy ?? '-'} first token at ${Math.round(trials.at(-1)?.startElsewhereMs ?? NaN)} ms`,
      );
    }
    const offline = summarize(trials.map((x) => x.offlineMs));
    const offlineSeen = summarize(trials.map((x) => x.offlineSeenMs));
    const restart = summarize(
      trials.map((x) => (Number.isNaN(x.startElsewhereMs) ? Number.POSITIVE_INFINITY : x.startElsewhereMs)),
    );
    const served = trials.filter((x) => x.servedBy === 'node-b').length;
    return {
      method:
        `Two pool-managerd nodes (real llama-server, synthetic model, 1 slot each), heartbeat ${heartbeatMs} ms on both ` +
        `sides. ${count} trials: after a random fraction of an interval, SIGSTOP node-a and at once submit a task that ` +
        "prefers node-a's pool (fallback allowed), which orchestratord still sees as placeable; GET /v2/nodes is polled every " +
        "5 ms until node-a is offline, and the node's `state_since` (when orchestratord marked it, ms resolution) times the " +
        "transition (the poll's own delay is kept as offline_seen_ms); the task's first token frame (from node-b) marks recovery " +
        '(dispatch accept timeout at its default, max(interval, 1 s)). Each trial waits at most ' +
        `${waitLimitMs / heartbeatMs} intervals, then SIGCONT; node-a rejoins before the next trial. Figures are in heartbeat ` +
        'intervals (max over trials) from the SIGSTOP.',
      samples: { trials: count },
      figures: {
        offline_intervals_max: {
          label: 'SIGSTOP → node offline, max',
          value: offline.max / heartbeatMs,
          unit: 'intervals',
        },
        offline_intervals_p50: {
          label: 'SIGSTOP → node offline, p50',
          value: offline.p50 / heartbeatMs,
          unit: 'intervals',
        },
        restart_intervals_max: {
          label: "SIGSTOP → its task's first token elsewhere, max",
          value: restart.max / heartbeatMs,
          unit: 'intervals',
        },
      },
      details: {
        heartbeat_ms: heartbeatMs,
        offline_ms: rounded(offline),
        offline_seen_ms: rounded(offlineSeen),
        start_elsewhere_ms: rounded(restart),
        served_by_node_b: served,
        trials,
      },
      notes:
        served < count
          ? [
              `${count - served} of ${count} task(s) were not served by the other node within ${waitLimitMs / heartbeatMs} intervals`,
            ]
          : [],
    };
  } finally {
    a.daemon.signal('SIGCONT');
    await agent.close();
    await Promise.all([a.daemon.stop(), b.daemon.stop()]);
    await orch.stop();
  }
}
