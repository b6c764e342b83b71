import { accessSync, constants } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

/**
 * The first executable `name` on `path` (a PATH value), then in `extraDirs` (Debian puts haproxy
 * in /usr/sbin, which a user's PATH often lacks); undefined when there is none.
 */
export function findProgram(
  name: string,
  path: string | undefined,
  extraDirs: readonly string[] = [],
): string | undefined {
  const dirs = [...(path ?? '').split(delimiter).filter((d) => isAbsolute(d)), ...extraDirs];
  for (const dir of dirs) {
    const file = join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here: the next directory
    }
  }
  return undefined;
}
