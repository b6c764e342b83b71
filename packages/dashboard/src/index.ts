import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Folder holding the built page (index.html + assets): `dist/web` of this package, from src/ or dist/ alike. */
export function dashboardAssetsDir(): string {
  return join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'web');
}

/** Whether the page has been built (`pnpm build` builds it). */
export function dashboardBuilt(dir = dashboardAssetsDir()): boolean {
  return existsSync(join(dir, 'index.html'));
}
