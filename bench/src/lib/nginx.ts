import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchError, UsageError } from '../errors.js';
import { cpuSeconds } from './proc.js';

/**
 * nginx as the relay's peer (issue 18): the same two places as the daemons, `proxy_buffering off`.
 * Debian's `nginx-light` (or `nginx`) provides the binary.
 */
const NGINX_CANDIDATES = ['/usr/sbin/nginx', '/usr/bin/nginx'];

function findNginx(): string | undefined {
  return NGINX_CANDIDATES.find((p) => existsSync(p));
}

/**
 * The nginx binary; installs Debian's `nginx-light` when missing and this runs as root, else throws
 * a UsageError saying how to install it.
 */
export function ensureNginx(log: (m: string) => void): string {
  const found = findNginx();
  if (found !== undefined) return found;
  if (process.getuid?.() !== 0) {
    throw new UsageError(
      'the relay benchmark compares with nginx, which is not installed: run `sudo apt-get update && sudo apt-get install -y nginx-light` (Debian/Ubuntu), then run the benchmark again',
    );
  }
  log('relay: nginx missing; installing Debian nginx-light (apt-get)');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [
    ['update', '-qq'],
    ['install', '-y', '-qq', 'nginx-light'],
  ]) {
    const r = spawnSync('apt-get', args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    if (r.status !== 0)
      throw new BenchError(`apt-get ${args.join(' ')} failed (${r.status}): ${r.stderr.toString().slice(-500)}`);
  }
  const installed = findNginx();
  if (installed === undefined) throw new BenchError('nginx-light installed but no nginx binary found');
  return installed;
}

export function nginxVersion(binary: string): string {
  try {
    // `nginx -v` prints to stderr.
    const r = spawnSync(binary, ['-v'], { encoding: 'utf8' });
    return (r.stderr || r.stdout).trim();
  } catch {
    return 'unknown';
  }
}

/** A free loopback port (bound and released: nginx cannot report a port 0 bind). */
async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve, reject) => srv.listen(0, '127.0.0.1', resolve).once('error', reject));
  const address = srv.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

/**
 * nginx.conf of one hop. `upstream: 'close'` = a new connection to the target per request (the
 * inner hop, like pool-managerd's adapter: llama-server closes a streamed connection anyway);
 * `'keepalive'` = the hop keeps its connections to the target (the outer hop, like orchestratord
 * to pool-managerd). One worker, no access log, responses passed on as they arrive.
 */
export function nginxConfig(o: {
  dir: string;
  name: string;
  port: number;
  targets: readonly URL[];
  upstream: 'keepalive' | 'close';
  asRoot: boolean;
}): string {
  const keep = o.upstream === 'keepalive';
  return [
    ...(o.asRoot ? ['user root root;'] : []),
    'worker_processes 1;',
    'daemon off;',
    `pid ${join(o.dir, `nginx-${o.name}.pid`)};`,
    `error_log ${join(o.dir, `nginx-${o.name}.error.log`)} warn;`,
    'events { worker_connections 1024; }',
    'http {',
    '  access_log off;',
    `  client_body_temp_path ${join(o.dir, `nginx-${o.name}-body`)};`,
    `  proxy_temp_path ${join(o.dir, `nginx-${o.name}-proxy`)};`,
    '  keepalive_requests 100000;',
    '  keepalive_timeout 120s;',
    '  tcp_nodelay on;',
    // Several targets: nginx balances round-robin (its default), a load balancer in front of replicas.
    `  upstream target { ${o.targets.map((t) => `server ${t.hostname}:${t.port}; `).join('')}${keep ? `keepalive ${8 * o.targets.length}; ` : ''}}`,
    '  server {',
    `    listen 127.0.0.1:${o.port};`,
    '    location / {',
    '      proxy_pass http://target;',
    '      proxy_http_version 1.1;',
    // Keepalive upstream: clear Connection so nginx reuses it; else nginx sends `Connection: close`.
    ...(keep ? ['      proxy_set_header Connection "";'] : []),
    '      proxy_buffering off;',
    '      proxy_request_buffering off;',
    '      proxy_read_timeout 300s;',
    '    }',
    '  }',
    '}',
    '',
  ].join('\n');
}

export interface NginxHop {
  readonly name: string;
  readonly url: string;
  /** The master's pid (its worker is a child). */
  readonly pid: number;
  /** CPU seconds of the master and its workers (proc.ts `cpuSeconds`). */
  cpuSeconds(): number;
  stop(): Promise<void>;
}

function childPids(pid: number): number[] {
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

/**
 * Starts one nginx hop in the foreground (`daemon off`), listening on a free loopback port; with
 * several targets it is a round-robin load balancer over them.
 */
export async function startNginxHop(
  binary: string,
  dir: string,
  name: string,
  target: string | readonly string[],
  upstream: 'keepalive' | 'close',
): Promise<NginxHop> {
  const port = await freePort();
  const asRoot = process.getuid?.() === 0;
  await mkdir(join(dir, `nginx-${name}-body`), { recursive: true });
  await mkdir(join(dir, `nginx-${name}-proxy`), { recursive: true });
  const conf = join(dir, `nginx-${name}.conf`);
  await writeFile(
    conf,
    nginxConfig({
      dir,
      name,
      port,
      targets: (typeof target === 'string' ? [target] : target).map((t) => new URL(t)),
      upstream,
      asRoot,
    }),
  );
  execFileSync(binary, ['-t', '-q', '-p', dir, '-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
  const child = spawn(binary, ['-p', dir, '-c', conf], { stdio: 'ignore' });
  const kill = (): void => {
    child.kill('SIGKILL');
  };
  // nginx must not outlive the runner (its port would stay taken).
  process.once('exit', kill);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => {
    gone = true;
    process.off('exit', kill);
  });
  const pid = child.pid as number;
  const url = `http://127.0.0.1:${port}`;
  const deadline = performance.now() + 10_000;
  for (;;) {
    if (gone)
      throw new BenchError(
        `nginx ${name} exited: ${readFileSync(join(dir, `nginx-${name}.error.log`), 'utf8').slice(-500)}`,
      );
    const up = await fetch(`${url}/health`).then(
      (r) => r.status > 0,
      () => false,
    );
    if (up && childPids(pid).length > 0) break;
    if (performance.now() > deadline) throw new BenchError(`nginx ${name} did not answer on ${url} within 10 s`);
    await sleep(20);
  }
  return {
    name,
    url,
    pid,
    cpuSeconds: () => [pid, ...childPids(pid)].reduce((a, p) => a + cpuSeconds(p), 0),
    // SIGTERM: nginx's fast shutdown; SIGKILL after the timeout.
    stop: async () => {
      if (gone) return;
      child.kill('SIGTERM');
      const timer = setTimeout(kill, 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
