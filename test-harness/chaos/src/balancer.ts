import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa, type ResultPromise } from 'execa';
import { request } from 'undici';
import type { DaemonExit } from './daemon.js';

export const HAPROXY = '/usr/sbin/haproxy';

export interface Balancer {
  readonly url: string;
  readonly lines: string[];
  stop(): Promise<DaemonExit>;
}

/**
 * HAProxy in front of the replicas, configured as `llorch up --replicas` does (leastconn, /readyz
 * checks, redispatch of refused connects, no buffering), with checks every `checkMs`. One
 * difference, on purpose: the replicas are listed again as unchecked backup servers, used only
 * while every checked one is down. With Redis down every replica's /readyz fails; `llorch up`'s
 * balancer then answers its own 503 page, here the replicas' typed 503 STORE_UNAVAILABLE comes
 * through, which is the answer the chaos client must get and judge.
 */
export async function startBalancer(port: number, replicaPorts: readonly number[], dir: string, checkMs: number): Promise<Balancer> {
  const cfg = [
    'global',
    '  log stderr format raw local0 warning',
    'defaults',
    '  mode http',
    '  log global',
    '  option http-no-delay',
    '  option redispatch 1',
    '  retries 2',
    '  retry-on conn-failure empty-response',
    '  timeout connect 2s',
    '  timeout client 120s',
    '  timeout server 120s',
    '  timeout http-keep-alive 10s',
    '  timeout check 1s',
    'frontend llorch',
    `  bind 127.0.0.1:${port}`,
    '  default_backend orchestratord',
    'backend orchestratord',
    '  balance leastconn',
    '  option allbackups',
    '  option httpchk GET /readyz',
    '  http-check expect status 200',
    `  default-server inter ${checkMs}ms fall 2 rise 2`,
    ...replicaPorts.map((p, i) => `  server r${i + 1} 127.0.0.1:${p} check`),
    ...replicaPorts.map((p, i) => `  server r${i + 1}-unchecked 127.0.0.1:${p} backup`),
    '',
  ].join('\n');
  const path = join(dir, 'haproxy.cfg');
  await writeFile(path, cfg);
  const child: ResultPromise = execa(HAPROXY, ['-db', '-f', path], { reject: false, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe', buffer: false, cleanup: true });
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
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (exit !== undefined) throw new Error(`haproxy exited (${exit.code ?? exit.signal}):\n${lines.join('\n')}`);
    const ok = await request(`${url}/readyz`)
      .then(async (r) => (await r.body.text(), r.statusCode === 200))
      .catch(() => false);
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`haproxy on ${url} did not pass /readyz within 15 s:\n${lines.join('\n')}`);
    await sleep(50);
  }
  return {
    url,
    lines,
    stop: async () => {
      if (exit === undefined) child.kill('SIGTERM');
      return exited;
    },
  };
}
