import { createHash } from 'node:crypto';

/** Server time in ms inside a script (Redis ≥ 5 replicates script effects, so TIME is allowed before writes). */
export const NOW_MS = `local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

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
