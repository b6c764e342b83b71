import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { InternalError } from '../../errors.js';
import { loadLuaScript, loadScripts, SCRIPT_NAMES } from './lua-script.js';

describe('Lua script loading', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  /** A lua folder with these files (paths relative to it). */
  function luaDir(files: Record<string, string>): URL {
    dir = mkdtempSync(join(tmpdir(), 'lua-'));
    mkdirSync(join(dir, 'includes'));
    for (const [path, text] of Object.entries(files)) writeFileSync(join(dir, path), text);
    return pathToFileURL(`${dir}/`);
  }

  it('resolves includes recursively, each once per script, where it is first asked for', () => {
    const d = luaDir({
      'main.lua': '--- @include "b"\n--- @include "a"\nreturn a() + b()\n',
      'includes/a.lua': '--- @include "clock"\nlocal function a() return clock() end\n',
      'includes/b.lua': '--- @include "clock"\nlocal function b() return clock() end\n',
      'includes/clock.lua': 'local function clock() return 1 end\n',
    });
    const s = loadLuaScript('main', d);
    expect(s.source).toBe(
      'local function clock() return 1 end\nlocal function b() return clock() end\n' +
        '-- (clock: included above)\nlocal function a() return clock() end\nreturn a() + b()\n',
    );
    expect(s.name).toBe('main');
    expect(s.sha).toMatch(/^[0-9a-f]{40}$/);
  });

  it('refuses a missing file, a malformed directive and an include cycle', () => {
    const d = luaDir({
      'missing.lua': '--- @include "nowhere"\n',
      'typo.lua': "--- @include 'a'\nreturn 1\n",
      'cycle.lua': '--- @include "x"\n',
      'includes/x.lua': '--- @include "y"\n',
      'includes/y.lua': '--- @include "x"\n',
    });
    expect(() => loadLuaScript('missing', d)).toThrow(/Lua script missing: cannot read .*includes\/nowhere\.lua/);
    expect(() => loadLuaScript('typo', d)).toThrow(/malformed include/);
    expect(() => loadLuaScript('cycle', d)).toThrow(/include cycle x → y → x/);
    expect(() => loadLuaScript('absent', d)).toThrow(InternalError);
  });

  it("loads every store script from the package's lua folder, each with its contract header and no function defined twice", () => {
    const scripts = loadScripts();
    expect([...scripts.keys()]).toEqual([...SCRIPT_NAMES]);
    for (const [name, script] of scripts) {
      expect(script.source.startsWith(`--[[\n  ${name}: `), name).toBe(true);
      expect(script.source, name).toMatch(/\n {2}KEYS {2}/);
      expect(script.source, name).toMatch(/\n {2}ARGV {2}/);
      expect(script.source, name).toMatch(/\n {2}Reply /);
      expect(script.source, name).not.toMatch(/^--- ?@include/m);
      const functions = [...script.source.matchAll(/^\s*local function (\w+)/gm)].map((m) => m[1]);
      expect(new Set(functions).size, name).toBe(functions.length);
    }
  });
});
