import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { request } from 'undici';
import type { DaemonExit } from '@llama-orch/daemon-support/daemon-launcher';
import { spawnHelper, untilHelperReady } from './helper-process.js';

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
export async function startBalancer(
  port: number,
  replicaPorts: readonly number[],
  dir: string,
  checkMs: number,
): Promise<Balancer> {
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
  const h = spawnHelper(HAPROXY, ['-db', '-f', path]);
  const url = `http://127.0.0.1:${port}`;
  const ready = (): Promise<boolean> =>
    request(`${url}/readyz`)
      .then(async (r) => (await r.body.text(), r.statusCode === 200))
      .catch(() => false);
  await untilHelperReady(h, `haproxy on ${url}`, ready, 15_000, 50);
  return {
    url,
    lines: h.lines,
    stop: async () => {
      if (h.exit() === undefined) h.child.kill('SIGTERM');
      return h.exited;
    },
  };
}
