// Test driver: plays the `llorch up` process (the daemons' parent) for up.process.test.ts, so the
// test can SIGKILL it. argv: <repo root> <pool-managerd config>. Runs until killed.
import { up } from '../commands/up.js';

const [repoRoot, config] = process.argv.slice(2);
if (repoRoot === undefined || config === undefined) throw new Error('usage: up-driver <repo root> <config>');
await up({
  repoRoot,
  config,
  addr: '127.0.0.1:0',
  token: undefined,
  cacheDir: repoRoot,
  out: process.stdout,
  signal: new AbortController().signal,
  readyTimeoutMs: 10 * 60_000,
});
