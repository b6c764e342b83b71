// Process level, in a pseudo-terminal: `llorch up` as a newcomer runs it (the built CLI, the real
// orchestratord and pool-managerd, the real llama-server from the shared test cache), then one
// Ctrl-C typed into the terminal. `script` (util-linux) provides the terminal: the ^C byte written
// to it becomes a SIGINT for the terminal's foreground process group, as it does for a person.
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { freeLoopbackPort } from '@llama-orch/daemon-support';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STOPPING_LINE } from './commands/up.js';
import { cmdline, descendants, running } from './testing/proc.js';
import { poolConfig } from './testing/up-cluster.js';

const PKG = dirname(dirname(fileURLToPath(import.meta.url)));
const REPO = dirname(dirname(PKG));
const MAIN = join(PKG, 'dist', 'main.js');
/** The engine and model cache the other suites share (engine-provisioner's testCacheDir). */
const CACHE = process.env.LLORCH_TEST_CACHE_DIR ?? join(REPO, '.cache', 'llama-orch');

/** The terminal's text without colours and cursor movement. */
function plain(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').replaceAll('\r', '');
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'llorch-up-pty-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('llorch up in a terminal, then Ctrl-C', () => {
  it(
    'starts, then stops cleanly: one stopping line, no WARN or ERROR, node deregistered, exit 0, no process left',
    async () => {
      for (const f of [
        MAIN,
        join(REPO, 'apps', 'orchestratord', 'dist', 'main.js'),
        join(REPO, 'apps', 'pool-managerd', 'dist', 'main.js'),
      ]) {
        expect(existsSync(f), `${f} missing: run pnpm build`).toBe(true);
      }
      const orchPort = await freeLoopbackPort();
      const config = await poolConfig(dir, `127.0.0.1:${orchPort}`);
      // exec: the program itself is the terminal's foreground process, as when a person types it at a
      // prompt; `sh -c` without it (dash, where SHELL is unset) would die of the ^C itself
      const command = `exec ${process.execPath} ${MAIN} up --addr 127.0.0.1:${orchPort} --config ${config}`;
      const term = execa('script', ['-qefc', command, '/dev/null'], {
        reject: false,
        stdin: 'pipe',
        env: { LLORCH_CACHE_DIR: CACHE, LOG_LEVEL: 'info' },
      });
      let raw = '';
      term.stdout.on('data', (c: Buffer) => {
        raw += c.toString();
      });

      const until = Date.now() + 5 * 60_000;
      while (Date.now() < until && !plain(raw).includes('llama-orch is up') && term.exitCode === null) await sleep(200);
      expect(plain(raw), 'llorch up did not report a ready cluster').toContain('llama-orch is up');
      const tree = descendants(term.pid!);
      expect(tree.map(cmdline).join('\n')).toMatch(/llama-server/);

      term.stdin.write('\x03');
      const result = await Promise.race([term, sleep(60_000).then(() => undefined)]);
      if (result === undefined) for (const p of [term.pid!, ...tree]) if (running(p)) process.kill(p, 'SIGKILL');
      const out = plain(raw);
      expect(result?.exitCode, out).toBe(0);

      const lines = out
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean);
      expect(
        lines.filter((l) => l === STOPPING_LINE),
        out,
      ).toHaveLength(1);
      expect(
        lines.filter((l) => /\b(WARN|ERROR|FATAL)\b/.test(l)),
        out,
      ).toEqual([]);
      expect(out).toMatch(/\[pool-managerd\] node dev-node deregistered/);
      expect(out).toMatch(/\[orchestratord\] Node dev-node deregistered/);
      // one line per event: orchestratord's listening line once, and Fastify's own not at all
      expect(lines.filter((l) => l.startsWith('[orchestratord] listening'))).toHaveLength(1);
      expect(out).not.toMatch(/Server listening at|fastify listening/);
      // every step each daemon takes on the way down is narrated, and both said they stopped
      expect(lines.filter((l) => /^\[(orchestratord|pool-managerd)\] stopped\b/.test(l))).toHaveLength(2);

      const exitedAt = Date.now();
      while (Date.now() - exitedAt < 5000 && tree.some(running)) await sleep(100);
      const left = tree.filter(running);
      for (const p of left) process.kill(p, 'SIGKILL');
      expect(left.map((p) => `${p}: ${cmdline(p)}`)).toEqual([]);
    },
    8 * 60_000,
  );
});
