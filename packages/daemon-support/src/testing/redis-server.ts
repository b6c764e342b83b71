// A real redis-server on a free loopback port: for the store tests (apps/orchestratord) and the replicas benchmark.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { access, constants, mkdir, rmdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, connect } from 'node:net';

/** How long a hook that may install redis-server (apt-get update + install) may take, ms. */
export const REDIS_INSTALL_TIMEOUT_MS = 10 * 60_000;

/** Where Debian's `redis-server` package puts the server. */
export const DEBIAN_REDIS_SERVER = '/usr/bin/redis-server';

export interface EnsureRedisServerOptions {
  /** Server binary. @default DEBIAN_REDIS_SERVER */
  path?: string;
  /** Progress lines (the install takes a minute). @default stderr */
  log?: (line: string) => void;
  /** Whether this process may run apt-get (root only). @default process.getuid() === 0 */
  canInstall?: boolean;
}

async function executable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}

function run(cmd: string, args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code as number) : 1;
      resolve({ code, out: `${stdout}${stderr}` });
    });
  });
}

/** apt's refusal when another apt or dpkg holds its lock (another suite installing its own package meanwhile). */
const APT_LOCKED = /Could not get lock|Unable to lock|is held by process/;

/**
 * apt-get, waiting for a lock another apt-get holds: other suites install their packages (the
 * browser tests' chromium) in parallel on a fresh machine. dpkg's lock is waited for by apt itself
 * (`DPkg::Lock::Timeout`), the package lists' lock by retrying, for at most 10 minutes.
 */
async function aptGet(args: string[]): Promise<{ code: number; out: string }> {
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    const r = await run('apt-get', ['-o', 'DPkg::Lock::Timeout=600', ...args]);
    if (r.code === 0 || !APT_LOCKED.test(r.out) || Date.now() > deadline) return r;
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

/**
 * Debian's `redis-server`, installed with apt-get when missing (as the browser tests install
 * chromium). Without root and without the binary it fails with the command to run: a store test
 * that silently does not run proves nothing.
 */
export async function ensureRedisServer(opts: EnsureRedisServerOptions = {}): Promise<string> {
  const path = opts.path ?? DEBIAN_REDIS_SERVER;
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  if (await executable(path)) return path;
  const canInstall = opts.canInstall ?? process.getuid?.() === 0;
  if (!canInstall) {
    throw new Error(
      `${path} is missing and this process is not root, so it cannot install it: run \`sudo apt-get update && sudo apt-get install -y redis-server\` (Debian's package)`,
    );
  }
  // Test files run in parallel workers: one installs, the others wait for it (apt holds a lock too,
  // but a second apt-get would fail on it rather than wait).
  const lock = join(tmpdir(), 'llorch-redis-server-install.lock');
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    if (await executable(path)) return path;
    const mine = await mkdir(lock).then(
      () => true,
      () => false,
    );
    if (mine) break;
    if (Date.now() > deadline) throw new Error(`waited 10 min for another test worker to install redis-server (lock ${lock}); remove the lock if no install is running`);
    await new Promise((r) => setTimeout(r, 500));
  }
  try {
    for (const args of [['update'], ['install', '-y', '--no-install-recommends', 'redis-server']]) {
      if (await executable(path)) break;
      log(`redis-server: apt-get ${args.join(' ')} (${path} is missing)`);
      const r = await aptGet(args);
      if (r.code !== 0) throw new Error(`apt-get ${args.join(' ')} failed (exit ${r.code}); install Debian's redis-server by hand:\n${r.out.slice(-4000)}`);
    }
  } finally {
    await rmdir(lock).catch(() => undefined);
  }
  if (!(await executable(path))) throw new Error(`apt-get installed redis-server but ${path} is still missing`);
  return path;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function pingOnce(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ port, host: '127.0.0.1' });
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(500, () => done(false));
    sock.once('error', () => done(false));
    sock.once('connect', () => sock.write('PING\r\n'));
    sock.once('data', (b) => done(b.toString().startsWith('+PONG')));
  });
}

export interface RedisServerHandle {
  readonly port: number;
  /** `redis://127.0.0.1:<port>/0` */
  readonly url: string;
  /** Kills the server (SIGKILL: a crash, nothing saved). */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty (no persistence). */
  restart(): Promise<void>;
  /** Stops it for good; idempotent. */
  stop(): Promise<void>;
}

/** Starts `redis-server` on a free port with no persistence; resolves once it answers PING. */
export async function startRedisServer(): Promise<RedisServerHandle> {
  const bin = await ensureRedisServer();
  const port = await freePort();
  let child: ChildProcess | undefined;
  let stopped = false;
  const startOne = async (): Promise<void> => {
    const c = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'no', '--loglevel', 'warning'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    c.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
    child = c;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (c.exitCode !== null) throw new Error(`redis-server exited with ${c.exitCode} on port ${port}: ${stderr}`);
      if (await pingOnce(port)) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    c.kill('SIGKILL');
    throw new Error(`redis-server did not answer PING on port ${port} within 10 s: ${stderr}`);
  };
  const kill = async (): Promise<void> => {
    const c = child;
    child = undefined;
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGKILL');
    });
  };
  await startOne();
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    kill,
    restart: async () => {
      await kill();
      await startOne();
    },
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await kill();
    },
  };
}
