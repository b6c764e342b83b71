// Process level: the daemons `llorch up` starts die with it even when it is SIGKILLed (parent-death
// signal through setpriv). The real orchestratord (built dist) and a stand-in pool-managerd (a
// script that sleeps: the real one would build an engine) under a temporary repo root.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectPdeathsigPrefix } from './pdeathsig.js';
import { childrenOf, cmdline, running } from './testing/proc.js';

const PKG = dirname(dirname(fileURLToPath(import.meta.url)));
const REPO = dirname(dirname(PKG));
const ORCH_MAIN = join(REPO, 'apps', 'orchestratord', 'dist', 'main.js');
const DRIVER = join(PKG, 'dist', 'testing', 'up-driver.js');

let root: string;
let setpriv: string[] | undefined;
beforeAll(async () => {
  execFileSync('npx', ['tsc', '--build', PKG], { cwd: PKG, stdio: 'inherit' });
  setpriv = await detectPdeathsigPrefix('SIGTERM');
  root = await mkdtemp(join(tmpdir(), 'llorch-up-'));
  await mkdir(join(root, 'apps', 'orchestratord', 'dist'), { recursive: true });
  await mkdir(join(root, 'apps', 'pool-managerd', 'dist'), { recursive: true });
  // Node resolves the symlink, so the real orchestratord finds its own node_modules.
  await symlink(ORCH_MAIN, join(root, 'apps', 'orchestratord', 'dist', 'main.js'));
  await writeFile(
    join(root, 'apps', 'pool-managerd', 'dist', 'main.js'),
    "process.stdout.write(JSON.stringify({ level: 30, msg: 'stand-in pool-managerd up' }) + '\\n'); setInterval(() => {}, 1000);\n",
  );
}, 120_000);
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('llorch up', () => {
  it('finds a working setpriv --pdeathsig on this host (else the daemons would outlive a killed llorch)', () => {
    expect(setpriv, 'setpriv (util-linux) is missing or refuses --pdeathsig').toBeDefined();
  });

  it('prints the dashboard URL once orchestratord listens; the daemons it started are gone within 5 s after it is SIGKILLed', async () => {
    expect(existsSync(ORCH_MAIN), `${ORCH_MAIN} missing: build apps/orchestratord`).toBe(true);
    const driver = execa(process.execPath, [DRIVER, root, join(root, 'pool.yaml')], {
      reject: false,
      env: { LOG_LEVEL: 'info' },
    });
    let out = '';
    driver.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const pid = driver.pid!;
    let daemons: number[] = [];
    const until = Date.now() + 20_000;
    while (Date.now() < until) {
      daemons = childrenOf(pid).filter((c) => cmdline(c).includes('main.js'));
      if (
        daemons.length === 2 &&
        out.includes('stand-in pool-managerd up') &&
        /\[orchestratord\] .*listening/.test(out) &&
        out.includes('dashboard: ')
      )
        break;
      await sleep(100);
    }
    expect(daemons, out).toHaveLength(2);
    expect(daemons.map(cmdline).join('\n')).toMatch(
      /orchestratord[\s\S]*pool-managerd|pool-managerd[\s\S]*orchestratord/,
    );
    // the dashboard's address, printed once orchestratord listens (its real port: the driver binds port 0)
    const listening = /\[orchestratord\] listening .*url=(http:\/\/127\.0\.0\.1:\d+)/.exec(out);
    expect(listening, out).not.toBeNull();
    expect(out).toContain(`dashboard: ${listening![1]}/\n`);
    driver.kill('SIGKILL');
    await driver;
    const killedAt = Date.now();
    while (Date.now() - killedAt < 5000 && daemons.some(running)) await sleep(50);
    const left = daemons.filter(running);
    for (const d of left) process.kill(d, 'SIGKILL');
    expect(left.map((d) => `${d}: ${cmdline(d)}`)).toEqual([]);
  }, 60_000);
});
