import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { request } from 'undici';
import { stringify } from 'yaml';
import { appMain, launchDaemon, sharedCacheDir, type CapturedDaemon } from '@llama-orch/chaos';

/** Debian's redis-server, as the store tests use it. */
const REDIS_SERVER = '/usr/bin/redis-server';

/** Why redis-server cannot run here, or undefined (installed with apt-get when missing and root). */
export async function redisUnavailable(): Promise<string | undefined> {
  if (existsSync(REDIS_SERVER)) return undefined;
  if (process.getuid?.() !== 0) return `${REDIS_SERVER} is missing (apt-get install redis-server)`;
  const r = await execa(
    'sh',
    ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server'],
    { reject: false, timeout: 300_000 },
  );
  return r.exitCode === 0 && existsSync(REDIS_SERVER)
    ? undefined
    : `redis-server is missing and apt-get could not install it: ${r.stderr.trim().split('\n').at(-1) ?? ''}`;
}

function pingOnce(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ port, host });
    const done = (ok: boolean): void => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(500, () => done(false));
    sock.once('error', () => done(false));
    sock.once('connect', () => sock.write('PING\r\n'));
    sock.once('data', (b) => done(b.toString().startsWith('+PONG')));
  });
}

export interface LabRedis {
  readonly port: number;
  stop(): Promise<void>;
}

/**
 * redis-server on every address of the namespace that `wrap` enters (no persistence); resolves once
 * `pingHost` answers PING. Stopped with SIGKILL (nothing to save).
 */
export async function startLabRedis(wrap: readonly string[], pingHost: string, port: number): Promise<LabRedis> {
  // pdeathsig as for the daemons (chaos's daemon.ts): a killed test worker takes its Redis along
  const pdeathsig = ['/usr/bin/setpriv', '/bin/setpriv'].some((p) => existsSync(p))
    ? ['setpriv', '--pdeathsig', 'SIGKILL', '--']
    : [];
  const [file = REDIS_SERVER, ...rest] = [...wrap, ...pdeathsig, REDIS_SERVER];
  const child: ChildProcess = spawn(
    file,
    [
      ...rest,
      '--port',
      String(port),
      '--bind',
      '0.0.0.0',
      '--save',
      '',
      '--appendonly',
      'no',
      '--protected-mode',
      'no',
      '--loglevel',
      'warning',
    ],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  };
  const deadline = Date.now() + 10_000;
  while (!(await pingOnce(pingHost, port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer PING at ${pingHost}:${port}: ${stderr}`);
    }
    await sleep(20);
  }
  return { port, stop };
}

export interface ReplicaSpec {
  name: string;
  /** `host:port` to listen on (a non-loopback address needs the token, which every lab daemon gets). */
  addr: string;
  token: string;
  heartbeatMs: number;
  /** Absent = the in-process store (a single orchestratord). */
  redisUrl?: string;
  replicaId?: string;
  wrap?: readonly string[];
  env?: Record<string, string>;
}

/** One orchestratord (a replica when `redisUrl` is set), resolved once it listens. */
export function startReplica(spec: ReplicaSpec): Promise<CapturedDaemon> {
  const env: Record<string, string> = {
    ORCHD_ADDR: spec.addr,
    LLORCH_API_TOKEN: spec.token,
    ORCHD_NODE_HEARTBEAT_MS: String(spec.heartbeatMs),
    LOG_LEVEL: 'info',
    ...spec.env,
  };
  if (spec.redisUrl !== undefined) {
    env.ORCHD_REDIS_URL = spec.redisUrl;
    env.ORCHD_REPLICA_ID = spec.replicaId ?? spec.name;
    const [host, port] = spec.addr.split(':');
    if (port !== undefined && port !== '0') env.ORCHD_ADVERTISE_URL = `http://${host}:${port}`;
  }
  return launchDaemon(
    {
      name: spec.name,
      output: 'capture',
      script: appMain('orchestratord'),
      args: [],
      env,
      ...(spec.wrap !== undefined ? { wrap: spec.wrap } : {}),
    },
    { timeoutMs: 30_000 },
  );
}

export interface NodeSpec {
  id: string;
  poolId: string;
  /** Address pool-managerd listens on. */
  host: string;
  /** Its API port. @default 0 (a free port) */
  port?: number;
  /** Its h2c dispatch port. @default a free port */
  dispatchPort?: number;
  orchestratorUrl: string;
  token: string;
  heartbeatMs: number;
  slots: number;
  /** Engine context, shared by the slots. @default 2048 */
  ctx?: number;
  workDir: string;
  wrap?: readonly string[];
}

/**
 * The lab's model: the synthetic llama with a 2,048-token training context (the default's 256 caps a
 * task at ~200 tokens, a fraction of a second here, too short to cut a link in the middle of it).
 */
export const LAB_MODEL = 'synthetic:llama?ctx=2048';
/** What the tasks ask for (the pools' alias of {@link LAB_MODEL}). */
export const LAB_MODEL_ALIAS = 'partitions-llama';

/** One pool-managerd with one pool of {@link LAB_MODEL} on the shared engine and model cache. */
export async function startNode(spec: NodeSpec): Promise<CapturedDaemon> {
  const runtimeDir = join(spec.workDir, spec.id);
  await mkdir(runtimeDir, { recursive: true });
  const configPath = join(spec.workDir, `${spec.id}.yaml`);
  await writeFile(
    configPath,
    stringify({
      node: {
        id: spec.id,
        addr: `${spec.host}:${spec.port ?? 0}`,
        ...(spec.dispatchPort !== undefined ? { dispatch_h2c_addr: `${spec.host}:${spec.dispatchPort}` } : {}),
      },
      orchestrator: { url: spec.orchestratorUrl, heartbeat_interval_ms: spec.heartbeatMs },
      api_token: spec.token,
      runtime_dir: runtimeDir,
      cache_dir: sharedCacheDir(),
      pools: [
        {
          id: spec.poolId,
          model: LAB_MODEL,
          aliases: [LAB_MODEL_ALIAS],
          gpu: 'off',
          ctx: spec.ctx ?? 2048,
          slots: spec.slots,
          threads: 1,
        },
      ],
    }),
  );
  return launchDaemon(
    {
      name: `pool-managerd:${spec.id}`,
      output: 'capture',
      script: appMain('pool-managerd'),
      args: ['--config', configPath],
      env: { LOG_LEVEL: 'info', LLORCH_CHAOS_RUN: spec.workDir },
      cwd: runtimeDir,
      ...(spec.wrap !== undefined ? { wrap: spec.wrap } : {}),
    },
    { timeoutMs: 60_000 },
  );
}

/** A pool as orchestratord lists it (the fields the tests read). */
export interface ListedPool {
  pool_id: string;
  node_id: string;
  ready: boolean;
  node_state: string;
  slots_free: number;
  slots_total: number;
}

/** `GET /v2/pools` of one orchestratord. */
export async function listPools(base: string, token: string): Promise<ListedPool[]> {
  const res = await request(new URL('/v2/pools', base), {
    headers: { authorization: `Bearer ${token}` },
    headersTimeout: 5000,
    bodyTimeout: 5000,
  });
  const body = (await res.body.json()) as { pools?: ListedPool[] };
  return body.pools ?? [];
}

/** Polls `check` every `everyMs` until it returns a value, or throws `what` after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  check: () => Promise<T | undefined>,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Waits until `base` lists each pool ready on an online node. */
export async function waitPoolsReady(
  base: string,
  token: string,
  poolIds: readonly string[],
  timeoutMs = 30 * 60_000,
): Promise<void> {
  await waitFor(
    `pools ${poolIds.join(', ')} ready at ${base}`,
    timeoutMs,
    async () => {
      const pools = await listPools(base, token);
      return poolIds.every((id) => pools.some((p) => p.pool_id === id && p.ready && p.node_state === 'online'))
        ? true
        : undefined;
    },
    100,
  );
}
