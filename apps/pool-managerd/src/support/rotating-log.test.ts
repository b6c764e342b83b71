import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { readFileSince, RotatingLogFile } from './rotating-log.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function waitFor(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !ok(); i++) await sleep(10);
  expect(ok()).toBe(true);
}

describe('RotatingLogFile', () => {
  it('rotates by size once the file is over it (copy, then truncate) and keeps N files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotlog-'));
    dirs.push(dir);
    const path = join(dir, 'logs', 'e.log');
    const log = new RotatingLogFile(path, { maxBytes: 10, keep: 2 });
    for (const c of ['aaaaaaaa\n', 'bbbbbbbb\n', 'cccccccc\n', 'dddddddd\n', 'eeeeeeee\n', 'ffffffff\n', 'gggggggg\n'])
      log.write(c);
    log.close();
    log.close();
    expect(readdirSync(join(dir, 'logs')).sort()).toEqual(['e.log', 'e.log.1', 'e.log.2']);
    expect(readFileSync(path, 'utf8')).toBe('gggggggg\n');
    expect(readFileSync(`${path}.1`, 'utf8')).toBe('eeeeeeee\nffffffff\n');
    expect(readFileSync(`${path}.2`, 'utf8')).toBe('cccccccc\ndddddddd\n');
  });

  it('a child writing to its descriptor follows a rotation: it goes on at the start of the truncated file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotlog-'));
    dirs.push(dir);
    const path = join(dir, 'e.log');
    const log = new RotatingLogFile(path, { maxBytes: 100, keep: 1 });
    const fd = log.fd as number;
    // Two writes by a real child process through the inherited descriptor, a rotation in between.
    const child = spawn('sh', ['-c', 'printf "%0200d\\n" 0; read _; echo after'], { stdio: ['pipe', fd, fd] });
    await waitFor(() => statSync(path).size > 200);
    log.rotateIfOver();
    child.stdin?.end('go\n');
    await once(child, 'exit');
    log.write('ours\n');
    log.close();
    expect(readFileSync(`${path}.1`, 'utf8')).toBe(`${'0'.repeat(200)}\n`);
    expect(readFileSync(path, 'utf8')).toBe('after\nours\n');
  });

  it('reads the end of a file, or what it holds from an offset on (from 0 after a truncation)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotlog-'));
    dirs.push(dir);
    const path = join(dir, 'e.log');
    expect(readFileSince(path, 0, 10).text).toBe('');
    const log = new RotatingLogFile(path, { maxBytes: 12, keep: 0 });
    log.write('0123456789\n');
    expect(readFileSince(path, 0, 4).text).toBe('789\n');
    expect(readFileSince(path, 5, 100)).toEqual({ text: '56789\n', end: 11 });
    expect(readFileSince(path, 5, 2)).toEqual({ text: '9\n', end: 11 });
    log.write('abc\n');
    log.write('d\n');
    log.close();
    expect(readFileSince(path, 11, 100)).toEqual({ text: 'd\n', end: 2 });
  });

  it('appends to an existing file across instances', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotlog-'));
    dirs.push(dir);
    const path = join(dir, 'e.log');
    const a = new RotatingLogFile(path);
    a.write('one\n');
    a.close();
    const b = new RotatingLogFile(path);
    b.write('two\n');
    b.close();
    expect(readFileSync(path, 'utf8')).toBe('one\ntwo\n');
  });
});
