import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa, type ResultPromise } from 'execa';
import type { DaemonExit } from './daemon.js';

/** Debian's redis-server (the store tests and `llorch up --replicas` use the same one). */
export const REDIS_SERVER = '/usr/bin/redis-server';

/** One redis-server generation on a fixed port, with its data (AOF) in `dir`. */
export interface RedisDaemon {
  readonly pid: number;
  readonly exited: Promise<DaemonExit>;
  readonly lines: string[];
  alive(): boolean;
  kill(sig: NodeJS.Signals): Promise<DaemonExit>;
}

/** Answers PING with +PONG within `timeoutMs`. */
export async function redisPing(port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    const done = (ok: boolean): void => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(timeoutMs, () => done(false));
    s.on('error', () => done(false));
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}

/**
 * redis-server as `llorch up --replicas` runs it: loopback, append-only file fsynced every second,
 * no RDB snapshots, data in `dir` — a restart in the same dir loads the AOF. Resolves once it
 * answers PING (after loading its data).
 */
export async function startRedis(port: number, dir: string): Promise<RedisDaemon> {
  const child: ResultPromise = execa(
    REDIS_SERVER,
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'everysec', '--save', '', '--daemonize', 'no'],
    { reject: false, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe', buffer: false, cleanup: true },
  );
  const lines: string[] = [];
  for (const s of [child.stdout, child.stderr])
    s?.on('data', (d: Buffer) =>
      lines.push(
        ...d
          .toString()
          .split('\n')
          .filter((l) => l !== ''),
      ),
    );
  let exit: DaemonExit | undefined;
  const exited = child.then((r) => (exit = { code: r.exitCode, signal: r.signal }));
  const pid = child.pid;
  if (pid === undefined) throw new Error('redis-server: spawn failed');
  const deadline = Date.now() + 15_000;
  while (!(await redisPing(port))) {
    if (exit !== undefined) throw new Error(`redis-server exited (${exit.code ?? exit.signal}) on port ${port}:\n${lines.slice(-20).join('\n')}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`redis-server did not answer PING on port ${port} within 15 s`);
    }
    await sleep(25);
  }
  return {
    pid,
    exited,
    lines,
    alive: () => exit === undefined,
    kill: async (sig) => {
      if (exit === undefined) child.kill(sig);
      return exited;
    },
  };
}
