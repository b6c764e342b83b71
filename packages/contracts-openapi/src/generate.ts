#!/usr/bin/env node
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderJsonSchemas } from './json-schemas.js';
import { renderOpenApi, renderServedDocuments } from './openapi.js';

/** Writes contracts/openapi/*.yaml and contracts/schemas/*.json at the repo root (`pnpm contracts:gen`). */
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const targets: Array<[string, Map<string, string>]> = [
  [join(repoRoot, 'contracts', 'openapi'), renderOpenApi()],
  [join(repoRoot, 'contracts', 'schemas'), renderJsonSchemas()],
];
for (const [dir, files] of targets) {
  await mkdir(dir, { recursive: true });
  for (const [name, text] of files) {
    await writeFile(join(dir, name), text);
    process.stdout.write(`wrote ${join(dir, name)}\n`);
  }
}
// The documents the daemons serve (`GET /openapi.json`), beside their code.
for (const [path, text] of renderServedDocuments()) {
  await writeFile(join(repoRoot, path), text);
  process.stdout.write(`wrote ${join(repoRoot, path)}\n`);
}
