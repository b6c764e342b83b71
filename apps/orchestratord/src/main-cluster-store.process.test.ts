// Process level: the built daemon (dist/main.js) with ORCHD_REDIS_URL — a malformed URL and an
// unreachable Redis stop the start with one fatal line; a live redis-server is used and closed.
import { execFileSync, spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { systemClock } from '@llama-orch/daemon-support';
import { pino } from 'pino';
import { createClusterStore } from './store/create-cluster-store.js';
import { defaultReplicaId } from './replicas/replica-identity.js';
import { REDIS_INSTALL_TIMEOUT_MS, startRedisServer, type RedisServerHandle } from './testing/redis-server.js';
import { TOKEN } from './testing/test-helpers.js';

const APP_DIR = dirname(dirname(fileURLToPath(import.meta.url)));
const MAIN = join(APP_DIR, 'dist', 'main.js');

let redis: RedisServerHandle;
beforeAll(async () => {
  execFileSync('npx', ['tsc', '--build', APP_DIR], { cwd: APP_DIR, stdio: 'inherit' });
  redis = await startRedisServer();
}, REDIS_INSTALL_TIMEOUT_MS);
afterAll(async () => {
  await redis.stop();
});

/** Runs the daemon until it exits or prints `until`; returns its JSON lines. */
function runDaemon(
  env: Record<string, string>,
  until?: string,
): Promise<{
  code: number | null;
  pid: number | undefined;
  lines: Array<Record<string, unknown>>;
  kill: () => Promise<number | null>;
}> {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', ORCHD_ADDR: '127.0.0.1:0', LLORCH_API_TOKEN: TOKEN, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let text = '';
  const lines = () =>
    text
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  const exited = new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
  const kill = () => {
    child.kill('SIGTERM');
    return exited;
  };
  return new Promise((resolve) => {
    child.stdout.on('data', (c: Buffer) => {
      text += c.toString('utf8');
      if (until !== undefined && text.includes(until)) resolve({ code: null, pid: child.pid, lines: lines(), kill });
    });
    void exited.then((code) => resolve({ code, pid: child.pid, lines: lines(), kill }));
  });
}

describe('orchestratord process with a cluster store', () => {
  it('a malformed ORCHD_REDIS_URL: one fatal line naming the variable, exit 1', async () => {
    const r = await runDaemon({ ORCHD_REDIS_URL: 'http://user:hunter2@cache:6379' });
    expect(r.code).toBe(1);
    expect(r.lines).toEqual([
      expect.objectContaining({
        level: 60,
        msg: expect.stringMatching(/ORCHD_REDIS_URL .*scheme http: is not redis: or rediss:/),
      }),
    ]);
    expect(JSON.stringify(r.lines)).not.toContain('hunter2');
  });

  it('an unreachable Redis: the start fails (fatal line, exit 1) before anything listens', async () => {
    const gone = await startRedisServer();
    await gone.stop();
    const r = await runDaemon({ ORCHD_REDIS_URL: `redis://:hunter2@127.0.0.1:${gone.port}/0` });
    expect(r.code).toBe(1);
    const fatal = r.lines.find((l) => l.level === 60);
    expect(fatal?.msg).toBe('failed to start');
    expect(JSON.stringify(fatal)).toMatch(/cannot reach the cluster store at redis:\/\/:\*\*\*@127\.0\.0\.1/);
    expect(JSON.stringify(r.lines)).not.toContain('hunter2');
    expect(r.lines.some((l) => l.msg === 'listening')).toBe(false);
  });

  it('a live Redis: it says what is shared so far, /readyz is ready, it is listed as a replica (<hostname>-<pid>, its bound address), SIGTERM leaves and exits 0', async () => {
    const r = await runDaemon({ ORCHD_REDIS_URL: redis.url, ORCHD_REDIS_PREFIX: 'proc:' }, '"msg":"listening"');
    expect(r.lines.find((l) => l.msg === 'cluster store')).toMatchObject({
      prefix: 'proc:',
      redis: redis.url,
      shared: [
        'rate limits',
        'readiness',
        'node registry and liveness',
        'slot leases',
        'admission queue',
        'task records',
        'sessions',
        'replica membership',
        'dashboard activity',
      ],
    });
    const url = (r.lines.find((l) => l.msg === 'listening') as { url: string }).url;
    let status = 0;
    for (let i = 0; i < 30 && status !== 200; i += 1) {
      status = (await request(`${url}/readyz`)).statusCode;
      if (status !== 200) await new Promise((res) => setTimeout(res, 100));
    }
    expect(status).toBe(200);
    const store = await createClusterStore(
      { redis_url: redis.url, redis_prefix: 'proc:' },
      { clock: systemClock, logger: pino({ level: 'silent' }) },
    );
    onTestFinished(() => store.close());
    expect(await store.replicas.list()).toMatchObject([
      { replica_id: defaultReplicaId(hostname(), r.pid ?? 0), address: url, tasks_relayed: 0, load: 0 },
    ]);
    expect(await r.kill()).toBe(0);
    // it left before its store connection closed: gone at once, not after its ttl
    expect(await store.replicas.list()).toEqual([]);
  });
});
