import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freeLoopbackPort } from '@llama-orch/daemon-support';
import { Agent, request } from 'undici';
import { BenchError, UsageError } from '../errors.js';
import type { BenchContext } from './context.js';
import { SseParser } from './sse.js';

/**
 * The failover benchmark's rolling restart: `llorch up --replicas 3` (the built CLI: redis-server,
 * 3 orchestratord replicas, HAProxy in front, pool-managerd with real llama-server and the
 * synthetic model, requirements/cpu-dev.yaml), steady /v1 and /v2 load through HAProxy, each
 * replica SIGTERMed in turn; llorch up restarts it on its port and the next one goes once
 * HAProxy has it back. Drain and ready-again times come from llorch up's own lines.
 */

export interface ReplicaRestart {
  replica: string;
  /** The replica's own `drained in N ms` (NaN: not drained, e.g. past its grace). */
  drainedMs: number;
  /** llorch up's `restarted: ready N ms after it exited`. */
  readyAfterExitMs: number;
  /** SIGTERM → HAProxy marked it UP again, ms (as this bench saw llorch up's relayed line). */
  backInBalancerMs: number;
}

export interface RollingRestart {
  restarts: ReplicaRestart[];
  ok: Record<string, number>;
  failed: string[];
  durationMs: number;
}

const KINDS = ['chat', 'stream', 'v2'] as const;
type Kind = (typeof KINDS)[number];

function children(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter((s) => s !== '')
      .map(Number);
  } catch {
    return [];
  }
}

function descendants(pid: number): number[] {
  const out: number[] = [];
  for (const c of children(pid)) out.push(c, ...descendants(c));
  return out;
}

function replicaPid(root: number, id: string): number | undefined {
  return descendants(root).find((p) => {
    try {
      const env = readFileSync(`/proc/${p}/environ`, 'utf8');
      const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8');
      return (
        env.split('\0').includes(`ORCHD_REPLICA_ID=${id}`) && cmd.includes('orchestratord') && !cmd.includes('setpriv')
      );
    } catch {
      return false;
    }
  });
}

/** One request of each kind, through the balancer; throws with what went wrong. */
async function once(kind: Kind, base: string, token: string, agent: Agent): Promise<void> {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const messages = [{ role: 'user', content: 'Write a haiku' }];
  if (kind === 'chat') {
    const r = await request(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ model: 'synthetic', messages, max_tokens: 16 }),
      dispatcher: agent,
    });
    const body = (await r.body.json()) as { choices?: Array<{ finish_reason?: string }> };
    if (r.statusCode !== 200 || body.choices?.[0]?.finish_reason !== 'length')
      throw new Error(`chat ${r.statusCode}: ${JSON.stringify(body).slice(0, 300)}`);
    return;
  }
  if (kind === 'stream') {
    const r = await request(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ model: 'synthetic', messages, max_tokens: 16, stream: true }),
      dispatcher: agent,
    });
    if (r.statusCode !== 200) throw new Error(`stream ${r.statusCode}: ${(await r.body.text()).slice(0, 300)}`);
    const parser = new SseParser();
    let finish: string | undefined;
    let done = false;
    for await (const chunk of r.body) {
      for (const f of parser.feed((chunk as Buffer).toString('utf8'))) {
        if (f.data === '[DONE]') done = true;
        else
          finish =
            (JSON.parse(f.data) as { choices?: Array<{ finish_reason?: string | null }> }).choices?.[0]
              ?.finish_reason ?? finish;
      }
    }
    if (finish !== 'length' || !done)
      throw new Error(`stream ended with finish_reason ${finish}${done ? '' : ', no [DONE]'}`);
    return;
  }
  const r = await request(`${base}/v2/tasks`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ prompt: 'Write a haiku', model_ref: 'synthetic', max_tokens: 16 }),
    dispatcher: agent,
  });
  const admitted = (await r.body.json()) as { streams?: { sse?: string } };
  if (r.statusCode !== 202 || admitted.streams?.sse === undefined)
    throw new Error(`POST /v2/tasks ${r.statusCode}: ${JSON.stringify(admitted).slice(0, 300)}`);
  const events = await request(admitted.streams.sse, { headers, dispatcher: agent });
  const text = await events.body.text();
  const last = [...text.matchAll(/^event: (\w+)$/gm)].at(-1)?.[1];
  if (events.statusCode !== 200 || last !== 'end' || !text.includes('event: token'))
    throw new Error(`v2 events ${events.statusCode} ended with ${last}: ${text.slice(-300)}`);
}

async function until(what: string, cond: () => boolean, ms: number, out: () => string): Promise<void> {
  const end = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > end)
      throw new BenchError(`${what} within ${ms} ms; llorch up said:\n${out().slice(-3000)}`);
    await sleep(50);
  }
}

/** Runs the rolling restart once; `loopsPerKind` concurrent loops of each kind of request. */
export async function rollingRestart(
  ctx: BenchContext,
  token: string,
  heartbeatMs: number,
  loopsPerKind: number,
): Promise<RollingRestart> {
  const cli = join(ctx.paths.root, 'packages', 'cli', 'dist', 'main.js');
  if (!existsSync(cli)) throw new UsageError(`${cli} is missing: run \`pnpm build\` first`);
  for (const bin of ['/usr/bin/redis-server', '/usr/sbin/haproxy']) {
    if (!existsSync(bin))
      throw new UsageError(`the rolling restart needs ${bin}: sudo apt-get install -y redis-server haproxy`);
  }
  const dir = join(ctx.dir, 'rolling');
  await mkdir(join(dir, 'run'), { recursive: true });
  const addr = `127.0.0.1:${await freeLoopbackPort()}`;
  const config = join(dir, 'pool.yaml');
  const base = readFileSync(join(ctx.paths.root, 'requirements', 'cpu-dev.yaml'), 'utf8');
  await writeFile(
    config,
    base
      .replace(/addr: 127\.0\.0\.1:\d+/, 'addr: 127.0.0.1:0')
      .replace(/url: http:\/\/127\.0\.0\.1:\d+/, `url: http://${addr}`)
      .replace(/heartbeat_interval_ms: \d+/, `heartbeat_interval_ms: ${heartbeatMs}`)
      .replace(/^node:/m, `runtime_dir: ${join(dir, 'run')}\nnode:`),
  );
  const llorch: ChildProcess = spawn(
    process.execPath,
    [
      cli,
      'up',
      '--replicas',
      '3',
      '--token',
      token,
      '--addr',
      addr,
      '--config',
      config,
      '--state-dir',
      join(dir, 'state'),
    ],
    {
      env: {
        ...process.env,
        LLORCH_CACHE_DIR: ctx.paths.cacheDir,
        LOG_LEVEL: 'info',
        ORCHD_NODE_HEARTBEAT_MS: String(heartbeatMs),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  llorch.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  llorch.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const text = (): string => out;
  const killAll = (): void => {
    for (const p of [...descendants(llorch.pid as number), llorch.pid as number]) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // gone
      }
    }
  };
  process.once('exit', killAll);
  const agent = new Agent({ connections: 4 * loopsPerKind * KINDS.length, keepAliveTimeout: 1000 });
  try {
    await until(
      'llorch up did not report a ready cluster',
      () => out.includes('llama-orch is up') || llorch.exitCode !== null,
      5 * 60_000,
      text,
    );
    if (llorch.exitCode !== null) throw new BenchError(`llorch up exited ${llorch.exitCode}:\n${out.slice(-3000)}`);
    const ok: Record<string, number> = { chat: 0, stream: 0, v2: 0 };
    const failed: string[] = [];
    let running = true;
    const loops = KINDS.flatMap((kind) =>
      Array.from({ length: loopsPerKind }, async () => {
        while (running) {
          try {
            await once(kind, `http://${addr}`, token, agent);
            ok[kind] = (ok[kind] ?? 0) + 1;
          } catch (err) {
            failed.push(`${new Date().toISOString()} ${kind}: ${(err as Error).message}`);
          }
        }
      }),
    );
    await sleep(2000);
    const t0 = performance.now();
    const restarts: ReplicaRestart[] = [];
    for (const id of ['r1', 'r2', 'r3']) {
      const pid = replicaPid(llorch.pid as number, id);
      if (pid === undefined) throw new BenchError(`replica ${id} not found among llorch up's processes`);
      const upsBefore = (out.match(new RegExp(`Server orchestratord/${id} is UP`, 'g')) ?? []).length;
      const restartedBefore = (out.match(new RegExp(`\\[orchestratord ${id}\\] restarted: ready`, 'g')) ?? []).length;
      const tTerm = performance.now();
      ctx.log(`failover: rolling restart: SIGTERM ${id}`);
      process.kill(pid, 'SIGTERM');
      await until(
        `${id} was not restarted`,
        () => (out.match(new RegExp(`\\[orchestratord ${id}\\] restarted: ready`, 'g')) ?? []).length > restartedBefore,
        60_000,
        text,
      );
      await until(
        `HAProxy did not take ${id} back`,
        () => (out.match(new RegExp(`Server orchestratord/${id} is UP`, 'g')) ?? []).length > upsBefore,
        20_000,
        text,
      );
      const back = performance.now() - tTerm;
      const drained = [...out.matchAll(new RegExp(`\\[orchestratord ${id}\\].*drained in (\\d+) ms`, 'g'))].at(-1)?.[1];
      const ready = [...out.matchAll(new RegExp(`\\[orchestratord ${id}\\] restarted: ready (\\d+) ms`, 'g'))].at(
        -1,
      )?.[1];
      restarts.push({
        replica: id,
        drainedMs: Number(drained ?? Number.NaN),
        readyAfterExitMs: Number(ready ?? Number.NaN),
        backInBalancerMs: back,
      });
      ctx.log(
        `failover: rolling restart: ${id} drained in ${drained} ms, ready ${ready} ms after its exit, back in HAProxy ${Math.round(back)} ms after SIGTERM`,
      );
    }
    // one more second of load on the restarted cluster
    await sleep(1000);
    running = false;
    await Promise.all(loops);
    return { restarts, ok, failed, durationMs: performance.now() - t0 };
  } finally {
    await agent.close();
    if (llorch.exitCode === null) {
      llorch.kill('SIGTERM');
      await Promise.race([new Promise((r) => llorch.once('exit', r)), sleep(60_000)]);
    }
    killAll();
    process.off('exit', killAll);
  }
}
