// The balancer's generated config: the checks and timeouts the replicas need, and HAProxy itself
// (Debian's, installed by the test setup when missing) accepts it without a warning.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEBIAN_INSTALL_TIMEOUT_MS, ensureDebianPackage } from '@llama-orch/daemon-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haproxyConfig, writeFileAtomic } from './haproxy-config.js';

const replicas = [
  { id: 'r1', addr: '127.0.0.1:41001' },
  { id: 'r2', addr: '127.0.0.1:41002' },
];

let haproxy: string;
let dir: string;
beforeAll(async () => {
  haproxy = await ensureDebianPackage({ pkg: 'haproxy', path: '/usr/sbin/haproxy', who: 'haproxy config tests' });
  dir = await mkdtemp(join(tmpdir(), 'llorch-haproxy-'));
}, DEBIAN_INSTALL_TIMEOUT_MS);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('haproxyConfig', () => {
  it('checks GET /readyz on every replica, retries a dead one elsewhere, never cuts a stream before the deadline', () => {
    const text = haproxyConfig({ bind: '127.0.0.1:8080', replicas, idleTimeoutMs: 360_000 });
    const lines = text.split('\n').map((l) => l.trim());
    expect(lines).toContain('bind 127.0.0.1:8080');
    expect(lines).toContain('option httpchk GET /readyz');
    expect(lines).toContain('http-check expect status 200');
    expect(lines).toContain('server r1 127.0.0.1:41001');
    expect(lines).toContain('server r2 127.0.0.1:41002');
    expect(lines).toContain('default-server check inter 1000ms fall 2 rise 2');
    expect(lines).toContain('option redispatch 1');
    expect(lines).toContain('retry-on conn-failure empty-response');
    // inactivity limits: a non-streamed answer is silent until its task ends
    for (const t of ['client', 'server', 'tunnel']) expect(lines).toContain(`timeout ${t} 360s`);
    // failed requests only, on stderr (which llorch up prints), with their termination flags
    for (const l of ['log stderr format raw local0 info', 'log global', 'option httplog', 'option dontlog-normal'])
      expect(lines).toContain(l);
    // nothing that would hold SSE frames back
    expect(text).not.toMatch(/compression|http-buffer-request/);
  });

  it('is accepted by haproxy -c without a warning', async () => {
    const cfg = join(dir, 'haproxy.cfg');
    await writeFileAtomic(cfg, haproxyConfig({ bind: '127.0.0.1:8080', replicas, idleTimeoutMs: 360_000 }));
    const r = spawnSync(haproxy, ['-c', '-f', cfg], { encoding: 'utf8' });
    expect({ status: r.status, output: `${r.stdout}${r.stderr}`.trim() }).toEqual({
      status: 0,
      output: 'Configuration file is valid',
    });
    // and the check is strict enough to catch a typo
    const bad = spawnSync(haproxy, ['-c', '-f', '/dev/stdin'], {
      input: readFileSync(cfg, 'utf8').replace('httpchk', 'httpchek'),
      encoding: 'utf8',
    });
    expect(bad.status).not.toBe(0);
    expect(execFileSync(haproxy, ['-v'], { encoding: 'utf8' })).toMatch(/^HAProxy version 2\./);
  });

  it('writeFileAtomic leaves the whole file and no temporary one', async () => {
    const path = join(dir, 'atomic.cfg');
    await writeFileAtomic(path, 'a\n');
    await writeFileAtomic(path, 'b\n');
    expect(readFileSync(path, 'utf8')).toBe('b\n');
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });
});
