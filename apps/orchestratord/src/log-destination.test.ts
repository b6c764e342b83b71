import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { execFileSync, spawnSync } from 'node:child_process';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from './test-helpers.js';
import { bufferedLogDestination } from './log-destination.js';

const APP_DIR = dirname(dirname(fileURLToPath(import.meta.url)));
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'orchd-logdest-'));
  dirs.push(dir);
  return dir;
}

function tempFile(): { path: string; fd: number } {
  const path = join(tempDir(), 'out.log');
  return { path, fd: openSync(path, 'a') };
}

describe('bufferedLogDestination', () => {
  it('writes lines byte-exact and in order, multi-byte text included', async () => {
    const { path, fd } = tempFile();
    const dest = bufferedLogDestination(fd, 60_000);
    const lines = ['{"msg":"one"}\n', '{"msg":"héllo ✓ — 漢字"}\n', `${'{"msg":"'}${'x'.repeat(5000)}"}\n`];
    for (const l of lines) dest.write(l);
    dest.flushSync();
    // The long line filled the buffer, so an asynchronous write was already under way; flushSync
    // writes what is still held, and the write in flight lands on its own.
    const expected = lines.join('');
    await waitFor(() => readFileSync(path).length >= Buffer.byteLength(expected), 5000, 'all lines written');
    expect(readFileSync(path, 'utf8')).toBe(expected);
  });

  it('holds a short line back, then writes it within the flush period without being asked', async () => {
    const { path, fd } = tempFile();
    const dest = bufferedLogDestination(fd, 50);
    dest.write('{"msg":"short"}\n');
    expect(readFileSync(path, 'utf8')).toBe('');
    await waitFor(() => readFileSync(path, 'utf8') === '{"msg":"short"}\n', 2000, 'periodic flush');
  });

  it('keeps every line of a burst larger than its buffer', async () => {
    const { path, fd } = tempFile();
    const dest = bufferedLogDestination(fd, 20);
    const expected: string[] = [];
    for (let i = 0; i < 2000; i++) {
      const l = `{"n":${i},"msg":"line ${i} ✓"}\n`;
      expected.push(l);
      dest.write(l);
    }
    await waitFor(() => readFileSync(path, 'utf8').length >= expected.join('').length, 5000, 'burst written');
    expect(readFileSync(path, 'utf8')).toBe(expected.join(''));
  });

  describe('in a process that exits right after logging', () => {
    beforeAll(() => {
      // The child runs the built module (incremental; the README's test command builds first anyway).
      execFileSync('npx', ['tsc', '--build', APP_DIR], { cwd: APP_DIR, stdio: 'inherit' });
    }, 120_000);

    it('the last lines (a fatal before exit(1)) still reach stdout', () => {
      const script = join(tempDir(), 'exit.mjs');
      const pinoUrl = pathToFileURL(join(APP_DIR, 'node_modules', 'pino', 'pino.js')).href;
      const destUrl = pathToFileURL(join(APP_DIR, 'dist', 'log-destination.js')).href;
      writeFileSync(script, [
        `import { pino } from '${pinoUrl}';`,
        `import { bufferedLogDestination } from '${destUrl}';`,
        'const logger = pino({ name: "t" }, bufferedLogDestination(1, 60_000));',
        'for (let i = 0; i < 3; i++) logger.info({ i }, "before");',
        'logger.fatal("failed to start");',
        'process.exit(1);',
      ].join('\n'));
      const out = spawnSync(process.execPath, [script], { encoding: 'utf8' });
      expect(out.status).toBe(1);
      const msgs = out.stdout.split('\n').filter((l) => l !== '').map((l) => (JSON.parse(l) as { msg: string }).msg);
      expect(msgs).toEqual(['before', 'before', 'before', 'failed to start']);
    });
  });
});
