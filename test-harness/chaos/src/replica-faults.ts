import { request } from 'undici';
import { until, type FaultRecord } from './fault-injector.js';
import type { ReplicaCluster, ReplicaSlot } from './replica-cluster.js';

async function status(url: string, init: Parameters<typeof request>[1] = {}): Promise<number> {
  return request(url, { ...init, headersTimeout: 2000, bodyTimeout: 2000 }).then(
    async (r) => (await r.body.text(), r.statusCode),
    () => 0,
  );
}

/**
 * SIGKILL of a replica mid-load, restarted on its port with its id at once (as `llorch up`
 * supervision does); recovered = the new one's /readyz 200 and every pool ready through the
 * balancer. Its tasks are taken over by the survivors meanwhile (the run's invariants judge that).
 */
export async function killReplica(cluster: ReplicaCluster, r: ReplicaSlot): Promise<FaultRecord> {
  const rec: FaultRecord = {
    kind: 'kill_replica',
    at: new Date().toISOString(),
    target: r.id,
    pid: r.generations.at(-1)?.pid ?? 0,
    details: {},
    recoveredMs: undefined,
    problems: [],
  };
  const t0 = Date.now();
  const k = await cluster.killReplica(r);
  rec.details = { old_pid: k.oldPid, new_pid: k.newPid, old_exit: k.exit, restarted_listening_ms: k.downMs };
  if (k.exit.signal !== 'SIGKILL')
    rec.problems.push(`replica ${r.id} ended with ${k.exit.code ?? k.exit.signal}, not SIGKILL`);
  const ready = await until(
    async () => ((await status(`${cluster.replicaUrl(r)}/readyz`)) === 200 ? true : undefined),
    30_000,
  );
  if (ready === undefined) rec.problems.push(`restarted replica ${r.id} not ready within 30 s`);
  try {
    await cluster.waitPoolsReady(30_000);
    rec.recoveredMs = Date.now() - t0;
  } catch (err) {
    rec.problems.push((err as Error).message);
  }
  return rec;
}

/**
 * SIGKILL of redis-server, down for `downMs`, restarted on its port with its AOF. While it is down
 * a replica's /readyz must turn 503 within 1 s and admission answers 503 STORE_UNAVAILABLE (the
 * load's clients meet it and count it as a refusal); recovered = every pool ready again with no
 * replica restarted.
 */
export async function killRedis(cluster: ReplicaCluster, downMs: number): Promise<FaultRecord> {
  const rec: FaultRecord = {
    kind: 'kill_redis',
    at: new Date().toISOString(),
    target: 'redis-server',
    pid: cluster.redis.pid,
    details: {},
    recoveredMs: undefined,
    problems: [],
  };
  const replica = cluster.replicas[0] as ReplicaSlot;
  const pidsBefore = cluster.replicas.map((r) => r.generations.at(-1)?.pid);
  const t0 = Date.now();
  const probe = async (): Promise<void> => {
    const notReady = await until(
      async () => ((await status(`${cluster.replicaUrl(replica)}/readyz`)) === 503 ? Date.now() : undefined),
      downMs,
      20,
    );
    if (notReady === undefined)
      rec.problems.push(`${replica.id} /readyz never answered 503 while Redis was down (${downMs} ms)`);
    else {
      rec.details.readyz_503_after_ms = notReady - t0;
      if (notReady - t0 > 1000)
        rec.problems.push(`${replica.id} /readyz turned 503 only ${notReady - t0} ms after the kill (bound 1 s)`);
    }
  };
  const k = await cluster.killRedis(downMs, probe);
  rec.details = {
    ...rec.details,
    old_pid: k.oldPid,
    new_pid: k.newPid,
    old_exit: k.exit,
    restarted_after_ms: k.restartedAfterMs,
  };
  try {
    await cluster.waitPoolsReady(30_000);
    rec.recoveredMs = Date.now() - t0;
  } catch (err) {
    rec.problems.push((err as Error).message);
  }
  const pidsAfter = cluster.replicas.map((r) => r.generations.at(-1)?.pid);
  if (pidsAfter.some((p, i) => p !== pidsBefore[i]))
    rec.problems.push('a replica was restarted across the Redis outage');
  if (cluster.replicas.some((r) => r.generations.at(-1)?.alive() !== true))
    rec.problems.push('a replica exited during the Redis outage');
  return rec;
}
