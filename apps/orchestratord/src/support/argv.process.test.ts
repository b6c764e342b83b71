// Process level: the built daemon answers --help and --version (exit 0) before starting anything,
// and refuses any other argument (exit 2, usage on stderr).
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ORCHESTRATOR_ENV } from '@llama-orch/contracts';
import { beforeAll, describe, expect, it } from 'vitest';

const APP_DIR = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
const MAIN = join(APP_DIR, 'dist', 'main.js');
const VERSION = (JSON.parse(readFileSync(join(APP_DIR, 'package.json'), 'utf8')) as { version: string }).version;

beforeAll(() => {
  execFileSync('npx', ['tsc', '--build', APP_DIR], { cwd: APP_DIR, stdio: 'inherit' });
}, 120_000);

// A daemon that ignored the flag would start serving on ORCHD_ADDR and hit the timeout.
function run(args: string[]): Promise<{ exitCode: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [MAIN, ...args],
      { timeout: 20_000, env: { PATH: process.env.PATH ?? '', ORCHD_ADDR: '127.0.0.1:0' } },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
        resolve({ exitCode: code, stdout: stdout.replace(/\n$/, ''), stderr: stderr.replace(/\n$/, '') });
      },
    );
  });
}

describe('orchestratord argv', () => {
  it('--help / -h print the usage with every environment variable and exit 0', async () => {
    for (const flag of ['--help', '-h']) {
      const r = await run([flag]);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^orchestratord — /);
      expect(r.stdout).toContain('usage: orchestratord [--help] [--version]');
      for (const env of Object.keys(ORCHESTRATOR_ENV)) expect(r.stdout).toMatch(new RegExp(`^  ${env} `, 'm'));
      expect(r.stdout).toMatch(/ORCHD_ADDR\s+addr \(default 127\.0\.0\.1:8080\)/);
      expect(r.stdout).not.toContain('"level"');
    }
  });

  it('--version / -V print the package version and exit 0', async () => {
    for (const flag of ['--version', '-V']) {
      const r = await run([flag]);
      expect([r.exitCode, r.stdout, r.stderr]).toEqual([0, `orchestratord ${VERSION}`, '']);
    }
  });

  it('an unknown option or argument: one line and the usage on stderr, exit 2', async () => {
    for (const [args, line] of [
      [['--port', '1'], "orchestratord: unknown option '--port'"],
      [['serve'], "orchestratord: unexpected argument 'serve'"],
    ] as const) {
      const r = await run([...args]);
      expect(r.exitCode).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr.split('\n').slice(0, 3)).toEqual([line, '', expect.stringMatching(/^orchestratord — /)]);
    }
  });
});
