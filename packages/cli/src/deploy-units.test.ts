// deploy/systemd: the service units parse cleanly in systemd's own verifier (no warnings: verify
// exits 0 on an unknown key or a bad value, it only prints them), keep the policies the README
// promises, and stay inside a hardening budget (`systemd-analyze security --offline`). The
// replica template is checked as an instance (`orchestratord@r1.service`, so `%i` resolves).
// deploy/haproxy and deploy/nginx: the balancer examples pass `haproxy -c` and `nginx -t`
// (Debian's packages, installed by the test setup when missing) and keep what replicas need.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEBIAN_INSTALL_TIMEOUT_MS, ensureDebianPackage } from '@llama-orch/daemon-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const UNITS_DIR = join(REPO, 'deploy', 'systemd');
const UNITS = ['orchestratord.service', 'pool-managerd.service', 'orchestratord@.service'] as const;
type Unit = (typeof UNITS)[number];
/** Highest acceptable exposure score (0 = locked down, 10 = none); pool-managerd needs the GPUs. */
const EXPOSURE_MAX: Record<Unit, number> = {
  'orchestratord.service': 2.5,
  'pool-managerd.service': 4.5,
  'orchestratord@.service': 2.5,
};
/** The daemon a unit runs (its apps/ folder). */
const APP: Record<Unit, string> = {
  'orchestratord.service': 'orchestratord',
  'pool-managerd.service': 'pool-managerd',
  'orchestratord@.service': 'orchestratord',
};
/** The file name systemd-analyze checks: a template as one of its instances. */
const checkedName = (unit: Unit): string => unit.replace('@.service', '@r1.service');

const hasSystemdAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;

/** `key=value` lines of one section (repeated keys keep every value). */
function section(text: string, name: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('[')) current = line;
    else if (current === `[${name}]` && line && !line.startsWith('#')) {
      const i = line.indexOf('=');
      const key = line.slice(0, i);
      out.set(key, [...(out.get(key) ?? []), line.slice(i + 1)]);
    }
  }
  return out;
}

describe('deploy/systemd units: policies', () => {
  for (const unit of UNITS) {
    it(`${unit}: restart on failure with a delay, KillMode reaching the engines, EnvironmentFile, journald, own user`, () => {
      const text = readFileSync(join(UNITS_DIR, unit), 'utf8');
      const s = section(text, 'Service');
      expect(s.get('Restart')).toEqual(['on-failure']);
      expect(s.get('RestartSec')?.[0]).toMatch(/^[1-9]\d*s$/);
      expect(['mixed', 'control-group']).toContain(s.get('KillMode')?.[0]);
      expect(s.get('EnvironmentFile')?.[0]).toMatch(/^\/etc\/llama-orch\/[\w-]+\.env$/);
      expect(s.get('StandardOutput')).toEqual(['journal']);
      expect(s.get('User')).toEqual(['llorch']);
      expect(s.get('NoNewPrivileges')).toEqual(['yes']);
      expect(s.get('ProtectSystem')).toEqual(['strict']);
      expect(s.get('ExecStart')?.[0]).toMatch(
        new RegExp(`^/usr/bin/node /opt/llama-orch/apps/${APP[unit]}/dist/main\\.js`),
      );
      expect(section(text, 'Install').get('WantedBy')).toEqual(['multi-user.target']);
    });
  }

  it('orchestratord@.service: the instance is the replica id, with its own env file, state dir and journal name', () => {
    const text = readFileSync(join(UNITS_DIR, 'orchestratord@.service'), 'utf8');
    const s = section(text, 'Service');
    expect(s.get('EnvironmentFile')).toEqual([
      '/etc/llama-orch/orchestratord.env',
      '/etc/llama-orch/orchestratord-%i.env',
    ]);
    expect(s.get('Environment')).toContain('ORCHD_REPLICA_ID=%i');
    expect(s.get('Environment')).toContain('ORCHD_STATE_DIR=%S/llama-orch/orchestratord-%i');
    expect(s.get('StateDirectory')).toEqual(['llama-orch/orchestratord-%i']);
    expect(s.get('SyslogIdentifier')).toEqual(['orchestratord-%i']);
    expect(section(text, 'Unit').get('After')?.[0]).toContain('redis-server.service');
    // the per-replica example sets exactly what differs between replicas
    const env = readFileSync(join(UNITS_DIR, 'orchestratord-replica.env.example'), 'utf8');
    const keys = env
      .split('\n')
      .filter((l) => /^[A-Z_]+=/.test(l))
      .map((l) => l.slice(0, l.indexOf('=')));
    expect(keys).toEqual(['ORCHD_ADDR', 'ORCHD_ADVERTISE_URL']);
  });

  it('pool-managerd.service keeps what building and running engines needs', () => {
    const s = section(readFileSync(join(UNITS_DIR, 'pool-managerd.service'), 'utf8'), 'Service');
    // writable cache for engine builds and models, pointed to by LLORCH_CACHE_DIR
    expect(s.get('CacheDirectory')).toEqual(['llama-orch']);
    expect(s.get('Environment')).toContain('LLORCH_CACHE_DIR=%C/llama-orch');
    expect(s.get('StateDirectory')).toEqual(['llama-orch/pool-managerd']);
    // the GPUs stay visible and V8/CUDA may JIT
    for (const key of ['PrivateDevices', 'MemoryDenyWriteExecute', 'DevicePolicy']) expect(s.has(key), key).toBe(false);
    expect(s.get('ExecStart')?.[0]).toContain('--config /etc/llama-orch/pool-managerd.yaml');
  });
});

// Not a pass where the tool is missing: the runner reports these as skipped.
describe.skipIf(!hasSystemdAnalyze)(
  'deploy/systemd units: systemd-analyze (skipped: systemd-analyze not installed)',
  () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'llorch-units-'));
      for (const unit of UNITS) {
        // verify checks that ExecStart's program exists: use this node where /usr/bin/node is absent.
        const text = readFileSync(join(UNITS_DIR, unit), 'utf8');
        if (existsSync('/usr/bin/node')) await copyFile(join(UNITS_DIR, unit), join(dir, checkedName(unit)));
        else await writeFile(join(dir, checkedName(unit)), text.replaceAll('/usr/bin/node ', `${process.execPath} `));
      }
    });
    afterAll(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it('systemd-analyze verify accepts every unit without a single warning', () => {
      const r = spawnSync('systemd-analyze', ['verify', '--man=no', ...UNITS.map((u) => join(dir, checkedName(u)))], {
        encoding: 'utf8',
      });
      expect({ status: r.status, output: `${r.stdout}${r.stderr}`.trim() }).toEqual({ status: 0, output: '' });
    });

    it('the verifier is strict enough to fail this test on a typo', async () => {
      const bad = join(dir, 'typo.service');
      await writeFile(
        bad,
        readFileSync(join(dir, checkedName(UNITS[0])), 'utf8').replace('Restart=on-failure', 'Restrt=on-failure'),
      );
      const r = spawnSync('systemd-analyze', ['verify', '--man=no', bad], { encoding: 'utf8' });
      expect(`${r.stdout}${r.stderr}`).toMatch(/Unknown key 'Restrt'/);
    });

    for (const unit of UNITS) {
      it(`${unit}: exposure score at most ${EXPOSURE_MAX[unit]} (systemd-analyze security --offline)`, () => {
        const help = spawnSync('systemd-analyze', ['security', '--help'], { encoding: 'utf8' }).stdout;
        if (!help.includes('--offline'))
          return expect.fail('this systemd-analyze has no security --offline (systemd < 250)');
        const out = execFileSync(
          'systemd-analyze',
          ['security', '--offline=yes', '--no-pager', join(dir, checkedName(unit))],
          { encoding: 'utf8' },
        );
        const score = Number(/Overall exposure level for \S+: (\d+(?:\.\d+)?)/.exec(out)?.[1]);
        expect(score, out.split('\n').slice(-3).join('\n')).toBeLessThanOrEqual(EXPOSURE_MAX[unit]);
      });
    }
  },
);

describe('deploy/haproxy: the balancer example', () => {
  let haproxy: string;
  beforeAll(async () => {
    haproxy = await ensureDebianPackage({ pkg: 'haproxy', path: '/usr/sbin/haproxy', who: 'deploy tests' });
  }, DEBIAN_INSTALL_TIMEOUT_MS);

  it('haproxy -c accepts llama-orch.cfg; it checks /readyz, retries a dead replica elsewhere, outlasts the default deadline', () => {
    const cfg = join(REPO, 'deploy', 'haproxy', 'llama-orch.cfg');
    const r = spawnSync(haproxy, ['-c', '-f', cfg], { encoding: 'utf8' });
    expect({ status: r.status, output: `${r.stdout}${r.stderr}`.trim() }).toEqual({
      status: 0,
      output: 'Configuration file is valid',
    });
    const lines = readFileSync(cfg, 'utf8')
      .split('\n')
      .map((l) => l.trim());
    for (const l of [
      'option httpchk GET /readyz',
      'http-check expect status 200',
      'option redispatch 1',
      'retry-on conn-failure empty-response',
      'balance leastconn',
    ]) {
      expect(lines).toContain(l);
    }
    for (const t of ['client', 'server', 'tunnel'])
      expect(
        Number(/^timeout \w+ (\d+)s$/.exec(lines.find((l) => l.startsWith(`timeout ${t} `)) ?? '')?.[1]),
      ).toBeGreaterThan(300);
  });
});

// nginx is only the alternative: not installed for this (its package starts a web server on :80).
const NGINX = '/usr/sbin/nginx';
describe.skipIf(!existsSync(NGINX))(
  'deploy/nginx: the alternative balancer example (skipped: Debian nginx not installed)',
  () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'llorch-nginx-'));
    });
    afterAll(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it('nginx -t accepts llama-orch.conf; it never buffers SSE and outlasts the default deadline', async () => {
      const conf = join(REPO, 'deploy', 'nginx', 'llama-orch.conf');
      await writeFile(join(dir, 'nginx.conf'), `events {}\nhttp {\n  include ${conf};\n}\n`);
      const r = spawnSync(NGINX, ['-t', '-q', '-p', dir, '-c', join(dir, 'nginx.conf'), '-e', 'stderr'], {
        encoding: 'utf8',
      });
      expect({ status: r.status, output: `${r.stdout}${r.stderr}`.trim() }).toEqual({ status: 0, output: '' });
      const text = readFileSync(conf, 'utf8');
      expect(text).toMatch(/^\s*proxy_buffering off;/m);
      expect(Number(/proxy_read_timeout (\d+)s;/.exec(text)?.[1])).toBeGreaterThan(300);
    });
  },
);
