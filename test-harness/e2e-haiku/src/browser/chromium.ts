import { access, constants } from 'node:fs/promises';
import { execa } from 'execa';

/** Where Debian's `chromium` package puts the browser. */
export const DEBIAN_CHROMIUM = '/usr/bin/chromium';

export interface EnsureChromiumOptions {
  /** Browser binary to use. @default DEBIAN_CHROMIUM */
  path?: string;
  /** Progress lines (the install takes a minute or two). @default stderr */
  log?: (line: string) => void;
  /** Whether this process may run apt-get (root only). @default process.getuid() === 0 */
  canInstall?: boolean;
}

/** apt's refusal when another apt or dpkg holds its lock (another suite installing its own package meanwhile). */
const APT_LOCKED = /Could not get lock|Unable to lock|is held by process/;

/**
 * apt-get, waiting for a lock another apt-get holds: other suites install their packages (the store
 * tests' redis-server) in parallel on a fresh machine. dpkg's lock is waited for by apt itself
 * (`DPkg::Lock::Timeout`), the package lists' lock by retrying, for at most 10 minutes.
 */
async function aptGet(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ exitCode?: number | undefined; all?: string | undefined }> {
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    const r = await execa('apt-get', ['-o', 'DPkg::Lock::Timeout=600', ...args], { env, reject: false, all: true });
    if (r.exitCode === 0 || !APT_LOCKED.test(r.all ?? '') || Date.now() > deadline) return r;
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

async function executable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}

/**
 * The browser for the dashboard tests: Debian's `chromium`, installed with apt-get when missing.
 * Never a browser download (playwright-core has none, and the machines have no internet beyond
 * the npm registry and Debian's mirrors). Without root and without the binary it fails with the
 * command to run, rather than skipping: a browser test that silently does not run proves nothing.
 */
export async function ensureChromium(opts: EnsureChromiumOptions = {}): Promise<string> {
  const path = opts.path ?? DEBIAN_CHROMIUM;
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  if (await executable(path)) return path;
  const canInstall = opts.canInstall ?? process.getuid?.() === 0;
  if (!canInstall) {
    throw new Error(
      `${path} is missing and this process is not root, so it cannot install it: run \`sudo apt-get update && sudo apt-get install -y chromium\` (Debian's package; the browser tests never download a browser)`,
    );
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update'], ['install', '-y', 'chromium']]) {
    log(`browser tests: apt-get ${args.join(' ')} (${path} is missing)`);
    const r = await aptGet(args, env);
    if (r.exitCode !== 0)
      throw new Error(
        `apt-get ${args.join(' ')} failed (exit ${r.exitCode}); install Debian's chromium by hand:\n${r.all?.slice(-4000) ?? ''}`,
      );
  }
  if (!(await executable(path))) throw new Error(`apt-get installed chromium but ${path} is still missing`);
  return path;
}
