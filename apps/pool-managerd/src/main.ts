#!/usr/bin/env node
import { fileURLToPath } from 'node:url';
import { loadBundle } from './support/bundle-loader.js';
import type * as Daemon from './daemon.js';

// The daemon's code as one bundle with a V8 code cache when `pnpm build` made a current one
// (start-up: fewer files to resolve, nothing to re-compile), else the tsc output module by module.
const loaded = loadBundle<typeof Daemon>(fileURLToPath(new URL('../bundle/', import.meta.url)));
if ('exports' in loaded) {
  loaded.exports.runDaemon({ code: 'bundle', codeCache: loaded.codeCache });
} else {
  const daemon = await import('./daemon.js');
  daemon.runDaemon({ code: 'modules', codeCache: 'off', bundleUnusable: loaded.unusable });
}
