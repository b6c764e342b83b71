// Process level: the built daemon answers --help and --version (exit 0) before loading its code,
// and refuses a wrong command line with the usage (exit 2) instead of a fatal JSON log line.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { beforeAll, describe, expect, it } from 'vitest';

const APP_DIR = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
const MAIN = join(APP_DIR, 'dist', 'main.js');
const VERSION = (JSON.parse(readFileSync(join(APP_DIR, 'package.json'), 'utf8')) as { version: string }).version;

beforeAll(() => {
  execFileSync('npx', ['tsc', '--build', APP_DIR], { cwd: APP_DIR, stdio: 'inherit' });
}, 120_000);

const run = (args: string[]) =>
  execa(process.execPath, [MAIN, ...args], {
    reject: false,
    timeout: 20_000,
    env: { PATH: process.env.PATH ?? '' },
    extendEnv: false,
  });

describe('pool-managerd argv', () => {
  it('--help / -h print the usage (--config, environment) and exit 0', async () => {
    for (const flag of ['--help', '-h']) {
      const r = await run([flag]);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^pool-managerd — /);
      expect(r.stdout).toContain('usage: pool-managerd --config <file.yaml>');
      for (const env of ['LLORCH_API_TOKEN', 'LLORCH_CACHE_DIR', 'LOG_LEVEL', 'HF_TOKEN'])
        expect(r.stdout).toMatch(new RegExp(`^  ${env} `, 'm'));
      expect(r.stdout).not.toContain('"level"');
    }
    // even next to a config that does not exist: nothing is loaded
    expect((await run(['--config', '/nonexistent.yaml', '--help'])).exitCode).toBe(0);
  });

  it('--version / -V print the package version and exit 0', async () => {
    for (const flag of ['--version', '-V']) {
      const r = await run([flag]);
      expect([r.exitCode, r.stdout, r.stderr]).toEqual([0, `pool-managerd ${VERSION}`, '']);
    }
  });

  it('an unknown option, a stray argument or no --config: one line and the usage on stderr, exit 2', async () => {
    const cases = [
      [['--config', 'x.yaml', '--verbose'], "pool-managerd: unknown option '--verbose'"],
      [['x.yaml'], "pool-managerd: unexpected argument 'x.yaml'"],
      [[], 'pool-managerd: missing --config <file.yaml>'],
      [['--config'], 'pool-managerd: --config needs a value'],
    ] as const;
    for (const [args, line] of cases) {
      const r = await run([...args]);
      expect(r.exitCode, args.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr.split('\n').slice(0, 3)).toEqual([line, '', expect.stringMatching(/^pool-managerd — /)]);
    }
  });
});
