#!/usr/bin/env node
import { fileURLToPath } from 'node:url';
import { parseDaemonArgv } from '@llama-orch/daemon-support/argv';
import { ARGV_SPEC } from './support/argv.js';
import { loadBundle } from './support/bundle-loader.js';
import type * as Daemon from './daemon.js';

// --help / --version / a wrong argument: answered before the daemon's code is loaded.
const argv = parseDaemonArgv(process.argv.slice(2), ARGV_SPEC);
if (argv.action === 'exit') {
  if (argv.stdout !== undefined) process.stdout.write(argv.stdout);
  if (argv.stderr !== undefined) process.stderr.write(argv.stderr);
  process.exit(argv.code);
}

// The daemon's code as one bundle with a V8 code cache when `pnpm build` made a current one
// (start-up: fewer files to resolve, nothing to re-compile), else the tsc output module by module.
const loaded = loadBundle<typeof Daemon>(fileURLToPath(new URL('../bundle/', import.meta.url)));
if ('exports' in loaded) {
  loaded.exports.runDaemon({ code: 'bundle', code_cache: loaded.codeCache });
} else {
  const daemon = await import('./daemon.js');
  daemon.runDaemon({ code: 'modules', code_cache: 'off', bundle_unusable: loaded.unusable });
}
