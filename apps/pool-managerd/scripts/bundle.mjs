#!/usr/bin/env node
// Build step after `tsc --build`: bundles dist/daemon.js and everything it imports into one
// CommonJS file, bundle/daemon.cjs, plus bundle/manifest.json (build id and every input's size and
// mtime). dist/main.js loads it with a V8 code cache when it is current, else the tsc output.
// Why: Node 20 resolves, reads and compiles ~600 module files at each start (≈ 0.4 s on 2 cores);
// one file with a code cache starts in a fraction of that. See .specs/50-pool-managerd.md.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync, renameSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outDir = join(pkgDir, 'bundle');
const file = 'daemon.cjs';

// Stale code caches of earlier builds go with the old bundle. The manifest, renamed into place
// last, is what makes a bundle usable: a build that fails half-way leaves none.
rmSync(outDir, { recursive: true, force: true });
mkdirSync(outDir, { recursive: true });
const bundlePath = join(outDir, file);
const result = await build({
  absWorkingDir: pkgDir,
  entryPoints: [join(pkgDir, 'dist', 'daemon.js')],
  outfile: bundlePath,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  metafile: true,
  logLevel: 'warning',
  // Less to read and scan at every start (performance notes: bundle); names stay, so stack traces
  // keep their function names. ASCII only, so the loader reads it as latin1 (no UTF-8 decoding).
  minifyWhitespace: true,
  charset: 'ascii',
  legalComments: 'external',
  // ESM code reads import.meta.url (package.json, createRequire): the bundle's own file URL, so
  // relative lookups start from bundle/ (one level below the package, like dist/).
  define: { 'import.meta.url': '__bundle_import_meta_url' },
  // The bundle runs as a vm.Script without a dynamic-import callback: an `import()` left in it
  // throws ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING. esbuild already turns those of bundled modules
  // into lazy requires; this does it for the rest too (the OTLP exporter's `import('http')`).
  supported: { 'dynamic-import': false },
  banner: { js: 'const __bundle_import_meta_url = require("node:url").pathToFileURL(__filename).href;' },
});
const bytes = readFileSync(bundlePath);
const nonAscii = bytes.findIndex((b) => b > 0x7f);
if (nonAscii >= 0) throw new Error(`bundle/${file} has a non-ASCII byte at ${nonAscii}; the loader reads it as latin1`);
const dynamicImport = bytes.indexOf('import(');
if (dynamicImport >= 0)
  throw new Error(`bundle/${file} has an import() at ${dynamicImport}, which fails in the loader's vm.Script`);
const buildId = createHash('sha256').update(bytes).digest('hex');
// Workspace inputs (tsc output) are checked one by one; third-party code through pnpm's record of
// the installed packages, which every install that changes node_modules rewrites.
const workspaceInputs = Object.keys(result.metafile.inputs)
  .map((p) => resolve(pkgDir, p))
  .filter((p) => !p.split(sep).includes('node_modules'));
const root = findWorkspaceRoot(pkgDir);
const inputs = [...new Set([...workspaceInputs, join(root, 'node_modules', '.pnpm', 'lock.yaml'), bundlePath])].map(
  (p) => {
    const st = statSync(p);
    return { path: relative(outDir, p), size: st.size, mtimeMs: st.mtimeMs };
  },
);
const manifest = { version: 1, file, buildId, inputs };
writeFileSync(join(outDir, 'manifest.json.tmp'), `${JSON.stringify(manifest, null, 1)}\n`);
renameSync(join(outDir, 'manifest.json.tmp'), join(outDir, 'manifest.json'));
const kib = Math.round(statSync(bundlePath).size / 1024);
process.stdout.write(`pool-managerd: bundle/${file} (${kib} KiB, ${inputs.length} inputs checked at start)\n`);

function findWorkspaceRoot(dir) {
  for (let d = dir; ; d = dirname(d)) {
    if (readdirSync(d).includes('pnpm-workspace.yaml')) return d;
    if (dirname(d) === d) throw new Error(`no pnpm-workspace.yaml above ${dir}`);
  }
}
