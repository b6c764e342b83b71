import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBundle, codeCachePath, loadBundle, type BundleManifest } from './bundle-loader.js';

let dir: string;

/** A tiny CommonJS "bundle" plus one more input, and a manifest as scripts/bundle.mjs writes it. */
function writeBundle(source: string): BundleManifest {
  writeFileSync(join(dir, 'b.cjs'), source);
  writeFileSync(join(dir, 'input.js'), 'export const x = 1;\n');
  const inputs = ['input.js', 'b.cjs'].map((path) => {
    const st = statSync(join(dir, path));
    return { path, size: st.size, mtimeMs: st.mtimeMs };
  });
  const manifest: BundleManifest = {
    version: 1,
    file: 'b.cjs',
    buildId: createHash('sha256').update(source).digest('hex'),
    inputs,
  };
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest));
  return manifest;
}

const SOURCE = `
const path = require('node:path');
function answer() { return 6 * 7; }
module.exports = { answer, base: path.basename(__filename), dirOk: __dirname.length > 0 };
`;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'bundle-loader-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('bundle loader', () => {
  it('runs a current bundle as CommonJS; the code cache is written at exit, then used', () => {
    const manifest = writeBundle(SOURCE);
    const exits: Array<() => void> = [];
    const first = loadBundle<{ answer: () => number; base: string; dirOk: boolean }>(dir, {
      atExit: (w) => exits.push(w),
    });
    if (!('exports' in first)) throw new Error(`unusable: ${first.unusable}`);
    expect(first.exports.answer()).toBe(42);
    expect(first.exports).toMatchObject({ base: 'b.cjs', dirOk: true });
    expect(first.codeCache).toBe('miss');
    expect(exits).toHaveLength(1);
    exits[0]?.();
    const cache = codeCachePath(dir, manifest);
    expect(statSync(cache).size).toBeGreaterThan(0);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);

    const again: Array<() => void> = [];
    const second = loadBundle<{ answer: () => number }>(dir, { atExit: (w) => again.push(w) });
    if (!('exports' in second)) throw new Error(`unusable: ${second.unusable}`);
    expect(second.codeCache).toBe('hit');
    expect(second.exports.answer()).toBe(42);
    expect(again).toHaveLength(0); // a used cache is not rewritten
  });

  it('a cache V8 refuses is reported and replaced at exit', () => {
    const manifest = writeBundle(SOURCE);
    writeFileSync(codeCachePath(dir, manifest), Buffer.from('not a V8 code cache, just bytes'));
    const exits: Array<() => void> = [];
    const loaded = loadBundle<{ answer: () => number }>(dir, { atExit: (w) => exits.push(w) });
    if (!('exports' in loaded)) throw new Error(`unusable: ${loaded.unusable}`);
    expect(loaded.codeCache).toBe('rejected');
    expect(loaded.exports.answer()).toBe(42);
    exits[0]?.();
    const next = loadBundle(dir, { atExit: () => undefined });
    expect('exports' in next && next.codeCache).toBe('hit');
  });

  it('a missing or malformed manifest, or any changed or missing input, makes the bundle unusable', () => {
    expect(checkBundle(dir)).toEqual({ unusable: 'no-manifest' });
    writeFileSync(join(dir, 'manifest.json'), '{ not json');
    expect(checkBundle(dir)).toEqual({ unusable: 'bad-manifest' });
    writeFileSync(
      join(dir, 'manifest.json'),
      JSON.stringify({ version: 1, file: 'b.cjs', buildId: 'short', inputs: [] }),
    );
    expect(checkBundle(dir)).toEqual({ unusable: 'bad-manifest' });

    writeBundle(SOURCE);
    expect('manifest' in checkBundle(dir)).toBe(true);
    // Same size, other mtime (what a tsc rebuild of an unchanged file does).
    const later = new Date(Date.now() + 5000);
    utimesSync(join(dir, 'input.js'), later, later);
    expect(checkBundle(dir)).toEqual({ unusable: 'stale' });
    expect(loadBundle(dir)).toEqual({ unusable: 'stale' });

    writeBundle(SOURCE);
    writeFileSync(join(dir, 'b.cjs'), `${readFileSync(join(dir, 'b.cjs'), 'utf8')}// edited\n`);
    expect(checkBundle(dir)).toEqual({ unusable: 'stale' });

    writeBundle(SOURCE);
    rmSync(join(dir, 'input.js'));
    expect(checkBundle(dir)).toEqual({ unusable: 'stale' });
  });
});
