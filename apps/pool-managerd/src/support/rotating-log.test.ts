import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RotatingLogFile } from './rotating-log.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('RotatingLogFile', () => {
  it('rotates by size and keeps N files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotlog-'));
    dirs.push(dir);
    const path = join(dir, 'logs', 'e.log');
    const log = new RotatingLogFile(path, { maxBytes: 10, keep: 2 });
    for (const c of ['aaaaaaaa\n', 'bbbbbbbb\n', 'cccccccc\n', 'dddddddd\n']) log.write(c);
    log.close();
    log.close();
    expect(readdirSync(join(dir, 'logs')).sort()).toEqual(['e.log', 'e.log.1', 'e.log.2']);
    expect(readFileSync(path, 'utf8')).toBe('dddddddd\n');
    expect(readFileSync(`${path}.1`, 'utf8')).toBe('cccccccc\n');
    expect(readFileSync(`${path}.2`, 'utf8')).toBe('bbbbbbbb\n');
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
