import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** The command that installs what `--replicas` needs, in the one-line errors. */
export const INSTALL_HINT = 'sudo apt-get install redis-server haproxy';

/**
 * redis-server's arguments for the cluster store of `llorch up --replicas`: loopback only, data in
 * `dataDir`, the append-only file fsynced every second (at most a second of writes lost when the
 * host dies; the queue, tasks, leases and sessions survive a restart), no RDB snapshots on top.
 */
export function redisArgs(port: number, dataDir: string): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dataDir,
    '--appendonly',
    'yes',
    '--appendfsync',
    'everysec',
    '--save',
    '',
    '--daemonize',
    'no',
    '--logfile',
    '',
    '--loglevel',
    'warning',
  ];
}

/** One of redis-server's log lines without its `pid:role date time level` head. */
export function redisLine(line: string): string {
  return line.replace(/^\d+:[A-Z] \d{1,2} \w{3} \d{4} [\d:.]+ [.\-*#] /, '');
}

/** Whether a Redis on loopback `port` answers PING. */
export function redisPing(port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ port, host: '127.0.0.1' });
    const done = (ok: boolean): void => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('error', () => done(false));
    sock.once('connect', () => sock.write('PING\r\n'));
    sock.once('data', (b) => done(b.toString().startsWith('+PONG')));
  });
}

/** Resolves once a Redis on `port` answers PING; false when `signal` aborts first. */
export async function waitRedis(port: number, signal: AbortSignal): Promise<boolean> {
  while (!signal.aborted) {
    if (await redisPing(port)) return true;
    await sleep(50);
  }
  return false;
}
