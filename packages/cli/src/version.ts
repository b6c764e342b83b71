import { readFileSync } from 'node:fs';

/** This package's version (package.json next to src/ and dist/). */
export function cliVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  if (typeof pkg.version !== 'string') throw new Error('packages/cli/package.json has no version');
  return pkg.version;
}
