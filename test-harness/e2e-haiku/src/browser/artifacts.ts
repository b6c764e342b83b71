import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { repoRoot } from '../cluster.js';

/** Where the browser tests keep their screenshots (gitignored): `.artifacts/dashboard/` at the repo root. */
export function dashboardArtifactsDir(): string {
  return join(repoRoot(), '.artifacts', 'dashboard');
}

/**
 * Saves a screenshot as `<dir>/<name>.png` and prints its path (the test's artifact). Full page by
 * default; `fullPage: false` for a modal dialog, whose backdrop covers only the viewport.
 */
export async function saveScreenshot(
  page: Page,
  name: string,
  opts: { fullPage?: boolean; dir?: string } = {},
): Promise<string> {
  const dir = opts.dir ?? dashboardArtifactsDir();
  await mkdir(dir, { recursive: true });
  const path = join(dir, `${name}.png`);
  await page.screenshot({ path, fullPage: opts.fullPage ?? true });
  process.stdout.write(`screenshot: ${path}\n`);
  return path;
}
