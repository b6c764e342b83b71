import { connect } from 'node:net';
import type { DaemonExit } from '@llama-orch/daemon-support/daemon-launcher';
import { spawnHelper, untilHelperReady } from './helper-process.js';

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
  const h = spawnHelper(REDIS_SERVER, [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--appendonly',
    'yes',
    '--appendfsync',
    'everysec',
    '--save',
    '',
    '--daemonize',
    'no',
  ]);
  const pid = h.child.pid;
  if (pid === undefined) throw new Error('redis-server: spawn failed');
  await untilHelperReady(h, `redis-server on port ${port}`, () => redisPing(port), 15_000, 25);
  return {
    pid,
    exited: h.exited,
    lines: h.lines,
    alive: () => h.exit() === undefined,
    kill: async (sig) => {
      if (h.exit() === undefined) h.child.kill(sig);
      return h.exited;
    },
  };
}
