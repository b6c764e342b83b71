import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { repoRoot } from '@llama-orch/e2e-haiku';

/** `test-harness/chaos/reports` (gitignored). */
export function reportsDir(): string {
  return join(repoRoot(), 'test-harness', 'chaos', 'reports');
}

/** Writes `reports/<timestamp>.json` (`<timestamp>-<suffix>.json` with a suffix) and returns its path. */
export async function writeReport(report: unknown, suffix?: string): Promise<string> {
  const dir = reportsDir();
  await mkdir(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const path = join(dir, suffix === undefined ? `${stamp}.json` : `${stamp}-${suffix}.json`);
  await writeFile(path, `${JSON.stringify(report, null, 2)}\n`);
  return path;
}
