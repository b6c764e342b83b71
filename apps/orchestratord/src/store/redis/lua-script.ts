import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { InternalError } from '../../errors.js';

/**
 * The scripts' folder, apps/orchestratord/lua/. It sits outside src/ because tsc copies no .lua
 * file; this module is three levels below the package in src/store/redis (vitest) and in
 * dist/store/redis (node) alike, so one relative URL finds it from both.
 */
export const LUA_DIR = new URL('../../../lua/', import.meta.url);

/** A line `--- @include "<name>"`: replaced by `includes/<name>.lua` of the same folder. */
const INCLUDE = /^--- @include "([a-z0-9-]+)"[ \t]*$/gm;

/** A Lua script run by its SHA (EVALSHA), loaded again with EVAL when the server lost its script cache (restart, SCRIPT FLUSH). */
export class LuaScript {
  readonly sha: string;

  constructor(
    readonly name: string,
    readonly source: string,
  ) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }
}

/**
 * Reads `<dir>/<name>.lua` with its includes resolved: each `--- @include "<inc>"` line becomes
 * `<dir>/includes/<inc>.lua`, whose own includes are resolved the same way. An include comes in
 * once per script, where it is first asked for (Lua needs a local function defined above its
 * use, and defined once); a later ask of it is left as a comment. Synchronous: called once per
 * script when the store is built. A missing file, a malformed directive or an include cycle
 * throws an InternalError (the installation is broken; no retry mends it).
 */
export function loadLuaScript(name: string, dir: URL = LUA_DIR): LuaScript {
  const included = new Set<string>();
  const expand = (file: URL, chain: readonly string[]): string => {
    const text = read(name, file).replace(INCLUDE, (_line, include: string) => {
      if (chain.includes(include))
        throw new InternalError(`Lua script ${name}: include cycle ${[...chain, include].join(' → ')}`);
      if (included.has(include)) return `-- (${include}: included above)`;
      included.add(include);
      return expand(new URL(`includes/${include}.lua`, dir), [...chain, include]).trimEnd();
    });
    const malformed = /^--- ?@include.*$/m.exec(text);
    if (malformed !== null)
      throw new InternalError(`Lua script ${name}: malformed include in ${fileURLToPath(file)}: ${malformed[0]}`);
    return text;
  };
  return new LuaScript(name, expand(new URL(`${name}.lua`, dir), []));
}

function read(name: string, file: URL): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new InternalError(`Lua script ${name}: cannot read ${fileURLToPath(file)}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** Every script of the store: lua/<name>.lua, whose header states its KEYS, ARGV and reply. */
export const SCRIPT_NAMES = [
  'queue-gone',
  'queue-remove',
  'task-acquire',
  'task-seize',
  'task-renew-many',
  'task-lapsed',
  'task-admit',
  'task-take-dispatch',
  'task-requeue',
  'task-finish',
  'task-seize-queued',
  'session-read',
  'activity-add-throughput',
  'node-register',
  'node-heartbeat',
  'node-deregister',
  'node-sweep',
  'rate-limit-hit',
  'replica-announce',
  'replica-list',
  'lease-acquire',
  'lease-renew',
  'lease-release',
  'lease-list',
  'catalog-put',
  'catalog-read',
  'catalog-delete',
  'catalog-claim-load',
  'catalog-release-load',
  'catalog-load-error',
  'record-put',
  'record-prune',
] as const;

export type ScriptName = (typeof SCRIPT_NAMES)[number];
export type ScriptSet = ReadonlyMap<ScriptName, LuaScript>;

/** Reads every script (includes resolved) from `dir`, synchronously: once, when the store is built. */
export function loadScripts(dir: URL = LUA_DIR): ScriptSet {
  return new Map(SCRIPT_NAMES.map((name) => [name, loadLuaScript(name, dir)]));
}
