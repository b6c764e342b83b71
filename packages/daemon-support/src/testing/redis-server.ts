// A real redis-server on a free loopback port: for the store tests (apps/orchestratord) and the replicas benchmark.
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { ensureDebianPackage, DEBIAN_INSTALL_TIMEOUT_MS } from './debian-package.js';
import { freeLoopbackPort } from '../free-port.js';

/** How long a hook that may install redis-server (apt-get update + install) may take, ms. */
export const REDIS_INSTALL_TIMEOUT_MS = DEBIAN_INSTALL_TIMEOUT_MS;

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

/**
 * Debian's `redis-server`, installed with apt-get when missing (as the browser tests install
 * chromium). Without root and without the binary it fails with the command to run: a store test
 * that silently does not run proves nothing.
 */
export async function ensureRedisServer(opts: EnsureRedisServerOptions = {}): Promise<string> {
  return ensureDebianPackage({
    pkg: 'redis-server',
    path: opts.path ?? DEBIAN_REDIS_SERVER,
    who: 'store tests',
    log: opts.log,
    canInstall: opts.canInstall,
  });
}

/** Whether a Redis server answers PING at `host:port` within 500 ms (a raw RESP exchange: no client library). */
export function pingRedisOnce(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ port, host });
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
  /** Starts it again on the same port: empty without persistence, with what its append-only file kept with `aofDir`. */
  restart(): Promise<void>;
  /** Stops it for good; idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts `redis-server` on a free port and resolves once it answers PING: with no persistence, or
 * with `aofDir` an append-only file there fsynced every second (as `llorch up --replicas` runs it),
 * so a restart after a kill loads what it kept.
 */
export async function startRedisServer(options: { aofDir?: string } = {}): Promise<RedisServerHandle> {
  const bin = await ensureRedisServer();
  const port = await freeLoopbackPort();
  let child: ChildProcess | undefined;
  let stopped = false;
  const startOne = async (): Promise<void> => {
    const persistence =
      options.aofDir === undefined
        ? ['--appendonly', 'no']
        : ['--appendonly', 'yes', '--appendfsync', 'everysec', '--dir', options.aofDir];
    const c = spawn(
      bin,
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        ...persistence,
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
    c.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
    child = c;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (c.exitCode !== null) throw new Error(`redis-server exited with ${c.exitCode} on port ${port}: ${stderr}`);
      if (await pingRedisOnce(port)) return;
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
