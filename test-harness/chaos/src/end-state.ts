import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import type { CapturedLine } from '@llama-orch/daemon-support/daemon-launcher';
import type { ChaosNode, HandoffInfo, NodePool } from './chaos-node.js';
import { enginesOf, pidAlive, type EngineProcessInfo } from './proc.js';

/** What both chaos clusters (one orchestratord, or replicas on Redis) offer the end-state checks. */
export interface NodesCluster {
  readonly nodes: readonly ChaosNode[];
  readonly workDir: string;
  readonly marker: string;
  readonly token: string;
  nodePools(node: ChaosNode): Promise<NodePool[]>;
  handoffs(node: ChaosNode): Promise<HandoffInfo[]>;
  allLines(): CapturedLine[];
}

/** Every llama-server pid seen in a handoff file during the run, polled every 200 ms until `stop`. */
export async function watchEngines(cluster: NodesCluster): Promise<{ pids: Set<number>; stop(): Promise<void> }> {
  const pids = new Set<number>();
  const poll = async (): Promise<void> => {
    for (const n of cluster.nodes) for (const h of await cluster.handoffs(n)) pids.add(h.pid);
  };
  await poll();
  const timer = setInterval(() => void poll(), 200);
  return {
    pids,
    stop: async () => {
      clearInterval(timer);
      await poll();
    },
  };
}

/** Quiescence at the nodes: every pool ready with all slots free and no lease, every engine's `/slots` idle (polled). Problems go to `leaks`. */
export async function checkNodesIdle(
  cluster: NodesCluster,
  leaks: string[],
): Promise<{ nodePools: Record<string, unknown>; engineSlots: Record<string, unknown> }> {
  const nodePools: Record<string, unknown> = {};
  const engineSlots: Record<string, unknown> = {};
  for (const n of cluster.nodes) {
    const st = await settle(async () => {
      const list = await cluster.nodePools(n);
      return { ok: list.every((p) => p.ready && p.slots_free === p.slots_total && p.active_leases === 0), value: list };
    }, 30_000);
    nodePools[n.id] = st.value;
    if (!st.ok) leaks.push(`${n.id}: pool slots not all free: ${JSON.stringify(st.value)}`);
    for (const p of Array.isArray(st.value) ? st.value : []) {
      if (p.engine_url === undefined) continue;
      const slots = await settle(async () => {
        const { status, body } = await getJson(new URL('/slots', p.engine_url), {});
        const arr = Array.isArray(body) ? (body as Array<{ id: number; is_processing: boolean }>) : [];
        return {
          ok: status === 200 && arr.length > 0 && arr.every((s) => s.is_processing === false),
          value: arr.map((s) => ({ id: s.id, is_processing: s.is_processing })),
        };
      }, 10_000);
      engineSlots[`${n.id}/${p.pool_id}`] = slots.value;
      if (!slots.ok) leaks.push(`${n.id}/${p.pool_id}: engine slots still processing: ${JSON.stringify(slots.value)}`);
    }
  }
  return { nodePools, engineSlots };
}

/** After every daemon stopped: each engine seen is dead (polled 10 s), none runs with the work dir, the API token is in no captured line. Problems go to `leaks`. */
export async function checkAfterStop(
  cluster: NodesCluster,
  enginePids: ReadonlySet<number>,
  leaks: string[],
): Promise<{ stillAlive: number[]; orphans: EngineProcessInfo[]; tokenLeaks: number }> {
  const stillAlive = await settle(async () => {
    const alive = [...enginePids].filter((pid) => pidAlive(pid));
    return { ok: alive.length === 0, value: alive };
  }, 10_000);
  for (const pid of stillAlive.value) leaks.push(`llama-server ${pid} outlived its pool-managerd`);
  const orphans = enginesOf([cluster.workDir], cluster.marker);
  for (const o of orphans) leaks.push(`orphan llama-server ${o.pid} (${o.reason}: ${o.argv.join(' ')})`);
  const tokenLeaks = cluster.allLines().filter((l) => l.text.includes(cluster.token)).length;
  if (tokenLeaks > 0) leaks.push(`API token in ${tokenLeaks} log line(s)`);
  return { stillAlive: stillAlive.value, orphans, tokenLeaks };
}

/** GET `url` with `auth`: status and the body as JSON (its text when it is not JSON). */
export async function getJson(url: URL, auth: Record<string, string>): Promise<{ status: number; body: unknown }> {
  const res = await request(url, { headers: auth, headersTimeout: 5000, bodyTimeout: 5000 });
  const text = await res.body.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // keep the text
  }
  return { status: res.statusCode, body };
}

/** Polls `probe` until ok or the timeout; returns the last value either way. */
export async function settle<T>(
  probe: () => Promise<{ ok: boolean; value: T }>,
  timeoutMs: number,
): Promise<{ ok: boolean; value: T }> {
  const deadline = Date.now() + timeoutMs;
  let last: { ok: boolean; value: T } | undefined;
  for (;;) {
    try {
      last = await probe();
      if (last.ok) return last;
    } catch (err) {
      if (last === undefined) last = { ok: false, value: String(err) as unknown as T };
    }
    if (Date.now() > deadline) return last;
    await sleep(100);
  }
}
