// Helpers of the process tests that run `llorch up` with the real daemons and engine.
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { DEBIAN_INSTALL_TIMEOUT_MS, ensureDebianPackage, freeLoopbackPort } from '@llama-orch/daemon-support';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, expect, onTestFinished } from 'vitest';
import { descendants, running } from './proc.js';

const PKG = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
export const REPO = dirname(dirname(PKG));
/** The built CLI. */
export const CLI_MAIN = join(PKG, 'dist', 'main.js');
/** The engine and model cache the other suites share (engine-provisioner's testCacheDir). */
export const TEST_CACHE = process.env.LLORCH_TEST_CACHE_DIR ?? join(REPO, '.cache', 'llama-orch');
/** The built daemons `llorch up` starts. */
export const DAEMON_MAINS = [
  join(REPO, 'apps', 'orchestratord', 'dist', 'main.js'),
  join(REPO, 'apps', 'pool-managerd', 'dist', 'main.js'),
];

/** requirements/cpu-dev.yaml in `dir`, pointed at `addr`, with its own runtime dir and a 1 s heartbeat (and `edit` applied). */
export async function poolConfig(
  dir: string,
  addr: string,
  edit: (yaml: string) => string = (y) => y,
): Promise<string> {
  const config = join(dir, 'pool.yaml');
  const base = edit(readFileSync(join(REPO, 'requirements', 'cpu-dev.yaml'), 'utf8'));
  await writeFile(
    config,
    base
      .replace(/addr: 127\.0\.0\.1:\d+/, 'addr: 127.0.0.1:0')
      .replace(/url: http:\/\/127\.0\.0\.1:\d+/, `url: http://${addr}`)
      .replace(/heartbeat_interval_ms: \d+/, 'heartbeat_interval_ms: 1000')
      .replace(/^node:/m, `runtime_dir: ${join(dir, 'run')}\nnode:`),
  );
  return config;
}

/** The replica id a process was started with (its ORCHD_REPLICA_ID). */
export function replicaId(pid: number): string | undefined {
  try {
    return /(?:^|\0)ORCHD_REPLICA_ID=([^\0]*)/.exec(readFileSync(`/proc/${pid}/environ`, 'utf8'))?.[1];
  } catch {
    return undefined;
  }
}

/** Polls `cond` every 50 ms for up to `ms`; fails with `what` and the output so far. */
export async function until(what: string, cond: () => boolean, ms: number, out: () => string): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end && !cond()) await sleep(50);
  expect(cond(), `${what}\n${out()}`).toBe(true);
}

export interface Up {
  llorch: ResultPromise<{ reject: false; all: true }>;
  base: string;
  text: () => string;
}

/** Runs `llorch up` with `args` until it reports a ready cluster; everything it started is killed when the test ends. */
export async function startUp(
  dir: string,
  name: string,
  token: string,
  args: string[],
  poolEdit?: (yaml: string) => string,
): Promise<Up> {
  for (const f of [CLI_MAIN, ...DAEMON_MAINS]) expect(existsSync(f), `${f} missing: run pnpm build`).toBe(true);
  const addr = `127.0.0.1:${await freeLoopbackPort()}`;
  const sub = join(dir, name);
  const config = await poolConfig(await mkdtemp(`${sub}-`), addr, poolEdit);
  const llorch = execa(
    process.execPath,
    [CLI_MAIN, 'up', ...args, '--token', token, '--addr', addr, '--config', config],
    {
      reject: false,
      env: { LLORCH_CACHE_DIR: TEST_CACHE, LOG_LEVEL: 'info' },
      all: true,
    },
  );
  onTestFinished(() => {
    for (const p of [llorch.pid!, ...descendants(llorch.pid!)]) if (running(p)) process.kill(p, 'SIGKILL');
  });
  let out = '';
  llorch.all.on('data', (c: Buffer) => {
    out += c.toString();
  });
  const text = (): string => out;
  await until(
    'llorch up did not report a ready cluster',
    () => out.includes('llama-orch is up') || llorch.exitCode !== null,
    3 * 60_000,
    text,
  );
  return { llorch, base: `http://${addr}`, text };
}

/** `</s>` (token 2 of the synthetic model's SPM vocabulary) banned: a generation runs to its max_tokens, never ends early by chance. */
export const NO_EOS = { logit_bias: { '2': -100 } };

/**
 * For a file of `llorch up --replicas` tests: Debian's redis-server and haproxy installed when
 * missing (before its tests) and a scratch directory, removed after them. Read `.path` in tests.
 */
export function replicasScratch(name: string): { readonly path: string } {
  let path = '';
  beforeAll(async () => {
    await ensureDebianPackage({
      pkg: 'redis-server',
      path: '/usr/bin/redis-server',
      who: 'llorch up --replicas tests',
    });
    await ensureDebianPackage({ pkg: 'haproxy', path: '/usr/sbin/haproxy', who: 'llorch up --replicas tests' });
    path = await mkdtemp(join(tmpdir(), `llorch-${name}-`));
  }, DEBIAN_INSTALL_TIMEOUT_MS);
  afterAll(async () => {
    if (path !== '') await rm(path, { recursive: true, force: true });
  });
  return {
    get path() {
      return path;
    },
  };
}
