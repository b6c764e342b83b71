import { setTimeout as sleep } from 'node:timers/promises';
import { BenchError } from '../errors.js';
import { ClientHandle } from '../load/client-handle.js';
import type { ClientReply } from '../load/stream-client.js';
import { cpuSeconds } from './proc.js';
import { summarize } from './stats.js';

type Measured = Extract<ClientReply, { type: 'measured' }>;
type Status = Extract<ClientReply, { type: 'status' }>;

/** A closed-loop relay load: `clients` processes × `streamsPerClient` streams, each task followed by the next as it ends. */
export interface RelayLoopLoad {
  readonly clients: number;
  readonly streamsPerClient: number;
  readonly model: string;
  /** Tokens per task. */
  readonly maxTokens: number;
  /** Events in the admission response (one request: what a load balancer needs) or POST then GET /events. */
  readonly inline: boolean;
}

export interface RelayLoopWindow {
  readonly seconds: number;
  /** Token frames the clients received in the window. */
  readonly tokens: number;
  /** Tasks that ended with `end` in the window. */
  readonly tasksEnded: number;
  /** Streams that ended any other way, or failed to open, since the load began (0 expected). */
  readonly errored: number;
  readonly terminal: Record<string, number>;
  /** FIXTURE send → client frame, ms. */
  readonly delayP50Ms: number;
  readonly delayP99Ms: number;
  /** CPU seconds of each watched process in the window (per-thread schedstat). */
  readonly cpuS: readonly number[];
}

async function allStatus(clients: readonly ClientHandle[]): Promise<Status[]> {
  return (await Promise.all(clients.map((c) => c.send({ type: 'status' })))) as Status[];
}

/**
 * Runs the load against `url`, lets it settle `settleS`, then measures `windowS` seconds: tokens at
 * the clients and the CPU of `pids` (the orchestratord replicas). The clients disconnect at the end
 * (orchestratord cancels their tasks).
 */
export async function relayLoopWindow(o: {
  clientScript: string;
  url: string;
  token: string;
  load: RelayLoopLoad;
  settleS: number;
  windowS: number;
  pids: readonly number[];
}): Promise<RelayLoopWindow> {
  const clients = Array.from({ length: o.load.clients }, () => new ClientHandle(o.clientScript));
  try {
    const opened = await Promise.all(
      clients.map((c) =>
        c.send({
          type: 'open',
          orchUrl: o.url,
          token: o.token,
          model: o.load.model,
          count: o.load.streamsPerClient,
          maxTokens: o.load.maxTokens,
          concurrency: o.load.streamsPerClient,
          inline: o.load.inline,
          repeat: true,
        }),
      ),
    );
    const failed = opened.flatMap((r) => (r.type === 'opened' && r.failed > 0 ? r.errors : []));
    if (failed.length > 0) throw new BenchError(`relay load: streams failed to open: ${failed.slice(0, 3).join('; ')}`);
    await sleep(o.settleS * 1000);
    const ended0 = (await allStatus(clients)).reduce((a, s) => a + s.ended, 0);
    await Promise.all(clients.map((c) => c.send({ type: 'measure', on: true })));
    const cpu0 = o.pids.map(cpuSeconds);
    const t0 = performance.now();
    await sleep(o.windowS * 1000);
    const cpu1 = o.pids.map(cpuSeconds);
    const seconds = (performance.now() - t0) / 1000;
    const measured = (await Promise.all(clients.map((c) => c.send({ type: 'measure', on: false })))) as Measured[];
    const terminal: Record<string, number> = {};
    for (const m of measured) for (const [k, v] of Object.entries(m.terminal)) terminal[k] = (terminal[k] ?? 0) + v;
    const d = summarize(measured.flatMap((m) => m.delaysUs));
    return {
      seconds,
      tokens: measured.reduce((a, m) => a + m.tokens, 0),
      tasksEnded: measured.reduce((a, m) => a + m.ended, 0) - ended0,
      errored: measured.reduce((a, m) => a + m.errored, 0),
      terminal,
      delayP50Ms: d.p50 / 1000,
      delayP99Ms: d.p99 / 1000,
      cpuS: cpu1.map((c, i) => c - (cpu0[i] as number)),
    };
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
}
