import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CapturedDaemon } from '@llama-orch/chaos';
import type { DelayRelay } from './delay-relay.js';
import { startLabRedis, startNode, startReplica, waitPoolsReady, type LabRedis } from './lab-daemons.js';
import { openTask, type TaskOutcome } from './lab-task.js';
import { NetLab, type LabHost } from './net-lab.js';
import { assertListensOnRelayedPorts, relayNodeLinks } from './relay-link.js';

export interface ImpairedClusterOptions {
  token: string;
  heartbeatMs: number;
  /** Tasks per load run (the baseline's and each impaired one's). */
  tasks: number;
  /** Tasks in flight at once. */
  concurrency: number;
  /** Every path between the replicas and each node through a delay relay ({@link relayNodeLinks}). */
  relayed: boolean;
}

/** A node's namespace, its daemon and (relayed clusters) its relay. */
export interface ImpairedNode {
  readonly host: LabHost;
  readonly daemon: CapturedDaemon;
  readonly relay: DelayRelay | undefined;
}

/** What one impaired load run gave, read from the clients and the daemons' lines. */
export interface ImpairedRun {
  readonly baseline: readonly TaskOutcome[];
  readonly outcomes: readonly TaskOutcome[];
  readonly errors: readonly TaskOutcome[];
  /** Tasks of this run that reached an engine. */
  readonly reachedEngine: number;
  /** `engine request sent` lines beyond one per task. */
  readonly extraDispatches: number;
  /** Re-placements after a failed attempt (not a saturated pool's 503, which is re-queued without a dispatch). */
  readonly requeued: number;
  readonly ttftMs: { p50: number; p95: number };
  readonly baselineTtftMs: { p50: number; p95: number };
  /** The line the test prints. */
  summary(label: string): string;
}

export function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}

const ttfts = (xs: readonly TaskOutcome[]): number[] => xs.map((e) => (e.firstTokenAt ?? e.endedAt) - e.admittedAt);
const p50p95 = (xs: readonly number[]): { p50: number; p95: number } => ({
  p50: percentile(xs, 50),
  p95: percentile(xs, 95),
});

/**
 * Scenario 3's cluster: two replicas (root namespace) sharing Redis (its own namespace) and two
 * nodes (one namespace each) heartbeating to replica-1, loaded once unimpaired for the baseline.
 */
export class ImpairedCluster {
  readonly nodes: ImpairedNode[] = [];
  #baseline: TaskOutcome[] = [];
  #replicas: CapturedDaemon[] = [];
  #redis: LabRedis | undefined;
  #workDir: string | undefined;

  private constructor(
    readonly lab: NetLab,
    readonly opts: ImpairedClusterOptions,
  ) {}

  /** Starts everything and runs the baseline load; on failure, what was started is stopped. */
  static async start(opts: ImpairedClusterOptions): Promise<ImpairedCluster> {
    const c = new ImpairedCluster(await NetLab.create(), opts);
    try {
      await c.#start();
    } catch (err) {
      await c.stop();
      throw err;
    }
    return c;
  }

  async #start(): Promise<void> {
    const { token, heartbeatMs } = this.opts;
    this.#workDir = await mkdtemp(join(tmpdir(), 'llorch-partitions-'));
    const redisHost = await this.lab.addHost('redis');
    const port = 20_000 + Math.floor(Math.random() * 40_000);
    this.#redis = await startLabRedis(this.lab.wrap(redisHost), redisHost.addr, port);
    for (const id of ['replica-1', 'replica-2']) {
      this.#replicas.push(
        await startReplica({
          name: id,
          addr: `${this.lab.hostAddr}:0`,
          token,
          heartbeatMs,
          redisUrl: `redis://${redisHost.addr}:${port}/0`,
        }),
      );
    }
    const orchestratorUrl = this.#replicas[0]?.url as string;
    for (const [id, poolId] of [
      ['node-a', 'pa'],
      ['node-b', 'pb'],
    ] as const) {
      const host = await this.lab.addHost(id);
      const links = this.opts.relayed ? await relayNodeLinks(this.lab, host, orchestratorUrl) : undefined;
      const spec = {
        id,
        poolId,
        host: host.addr,
        token,
        heartbeatMs,
        slots: 2,
        workDir: this.#workDir,
        wrap: this.lab.wrap(host),
      };
      const daemon = await startNode(
        links === undefined
          ? { ...spec, orchestratorUrl }
          : { ...spec, orchestratorUrl: links.orchestratorUrl, port: links.nodePort, dispatchPort: links.dispatchPort },
      ).catch(async (err: unknown) => {
        await links?.relay.stop();
        throw err;
      });
      this.nodes.push({ host, daemon, relay: links?.relay });
      if (links !== undefined) await assertListensOnRelayedPorts(daemon, links);
    }
    for (const r of this.#replicas) await waitPoolsReady(r.url, token, ['pa', 'pb']);
    this.#baseline = await this.load();
  }

  /** `tasks` tasks through the replicas in turn, `concurrency` at a time; every outcome. */
  async load(): Promise<TaskOutcome[]> {
    const urls = this.#replicas.map((r) => r.url);
    const out: TaskOutcome[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: this.opts.concurrency }, async () => {
        while (next < this.opts.tasks) {
          const i = next++;
          out.push(
            await openTask(urls[i % urls.length] as string, this.opts.token, { maxTokens: 48, timeoutMs: 60_000 }).done,
          );
        }
      }),
    );
    return out;
  }

  /** Impairs every node (`impair`), runs the load, lifts the impairment (`lift`, always); what it gave. */
  async run(
    impair: (n: ImpairedNode) => Promise<void>,
    lift: (n: ImpairedNode) => Promise<void>,
  ): Promise<ImpairedRun> {
    const daemons = this.nodes.map((n) => n.daemon);
    const before = new Set(daemons.flatMap((d) => d.lines.map((l) => l.json?.task_id)));
    for (const n of this.nodes) await impair(n);
    let outcomes: TaskOutcome[];
    try {
      outcomes = await this.load();
    } finally {
      for (const n of this.nodes) await lift(n);
    }
    const sent = new Map<string, number>();
    for (const d of daemons) {
      for (const l of d.lines) {
        if (l.json?.msg === 'engine request sent' && !before.has(l.json.task_id))
          sent.set(String(l.json.task_id), (sent.get(String(l.json.task_id)) ?? 0) + 1);
      }
    }
    const requeued = this.#replicas.flatMap((r) =>
      r.lines.filter(
        (l) => l.json?.msg === 'task re-queued' && l.json.saturated === false && !before.has(l.json.task_id),
      ),
    ).length;
    const errors = outcomes.filter((e) => e.kind === 'error');
    const ended = outcomes.filter((e) => e.kind === 'end');
    const ttftMs = p50p95(ttfts(ended));
    const baselineTtftMs = p50p95(ttfts(this.#baseline));
    const extraDispatches = [...sent.values()].reduce((a, n) => a + n - 1, 0);
    const offline = this.#replicas.flatMap((r) => r.lines.filter((l) => l.json?.msg === 'node offline')).length;
    const { concurrency } = this.opts;
    return {
      baseline: this.#baseline,
      outcomes,
      errors,
      reachedEngine: sent.size,
      extraDispatches,
      requeued,
      ttftMs,
      baselineTtftMs,
      summary: (label) =>
        `[partitions] ${label}: ${outcomes.length} tasks (${concurrency} at a time, 48 tokens), ${ended.length} ended, ${errors.length} errors ` +
        `${JSON.stringify(errors.map((e) => e.code))}; TTFT p50/p95 ${ttftMs.p50}/${ttftMs.p95} ms vs ${baselineTtftMs.p50}/${baselineTtftMs.p95} ms unimpaired; ` +
        `${sent.size} tasks reached an engine, ${extraDispatches} extra dispatches, ${requeued} re-placements after a failed attempt; 'node offline' lines so far: ${offline}`,
    };
  }

  /** Stops every daemon and relay and removes the lab. Never throws. */
  async stop(): Promise<void> {
    await Promise.all(
      [...this.nodes.map((n) => n.daemon), ...this.#replicas].map((d) =>
        d.stop('SIGTERM', 5000).catch(() => undefined),
      ),
    );
    await Promise.all(this.nodes.map((n) => n.relay?.stop()));
    await this.#redis?.stop();
    await this.lab.close();
    if (this.#workDir !== undefined) await rm(this.#workDir, { recursive: true, force: true });
  }
}
