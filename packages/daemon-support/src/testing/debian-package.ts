// Test support: a Debian package the tests need (redis-server, haproxy), installed by the test
// setup when missing, as the browser tests install chromium.
import { execFile } from 'node:child_process';
import { access, constants, mkdir, rmdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** How long a hook that may install a package (apt-get update + install) may take, ms. */
export const DEBIAN_INSTALL_TIMEOUT_MS = 10 * 60_000;

export interface EnsureDebianPackageOptions {
  /** Debian package name, e.g. `redis-server`. */
  pkg: string;
  /** The program the package installs, e.g. `/usr/bin/redis-server`. */
  path: string;
  /** Who asks, for the progress lines (`store tests`). */
  who: string;
  /** Progress lines (the install takes a minute). @default stderr */
  log?: (line: string) => void;
  /** Whether this process may run apt-get (root only). @default process.getuid() === 0 */
  canInstall?: boolean;
}

async function executable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}

function run(cmd: string, args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code =
          err === null
            ? 0
            : typeof (err as { code?: unknown }).code === 'number'
              ? ((err as { code: number }).code as number)
              : 1;
        resolve({ code, out: `${stdout}${stderr}` });
      },
    );
  });
}

/** apt's refusal when another apt or dpkg holds its lock (another suite installing its own package meanwhile). */
const APT_LOCKED = /Could not get lock|Unable to lock|is held by process/;

/**
 * apt-get, waiting for a lock another apt-get holds: other suites install their packages (the
 * browser tests' chromium) in parallel on a fresh machine. dpkg's lock is waited for by apt itself
 * (`DPkg::Lock::Timeout`), the package lists' lock by retrying, for at most 10 minutes.
 */
export async function aptGet(args: string[]): Promise<{ code: number; out: string }> {
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    const r = await run('apt-get', ['-o', 'DPkg::Lock::Timeout=600', ...args]);
    if (r.code === 0 || !APT_LOCKED.test(r.out) || Date.now() > deadline) return r;
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

/**
 * The program `opts.path` of Debian's package `opts.pkg`, installed with apt-get when missing.
 * Without root and without the program it fails with the command to run: a test that silently
 * does not run proves nothing.
 */
export async function ensureDebianPackage(opts: EnsureDebianPackageOptions): Promise<string> {
  const { pkg, path, who } = opts;
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  if (await executable(path)) return path;
  const canInstall = opts.canInstall ?? process.getuid?.() === 0;
  if (!canInstall) {
    throw new Error(
      `${path} is missing and this process is not root, so it cannot install it: run \`sudo apt-get update && sudo apt-get install -y ${pkg}\` (Debian's package)`,
    );
  }
  // Test files run in parallel workers: one installs, the others wait for it (apt holds a lock too,
  // but a second apt-get would fail on it rather than wait).
  const lock = join(tmpdir(), `llorch-${pkg}-install.lock`);
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    if (await executable(path)) return path;
    const mine = await mkdir(lock).then(
      () => true,
      () => false,
    );
    if (mine) break;
    if (Date.now() > deadline)
      throw new Error(
        `waited 10 min for another test worker to install ${pkg} (lock ${lock}); remove the lock if no install is running`,
      );
    await new Promise((r) => setTimeout(r, 500));
  }
  try {
    for (const args of [['update'], ['install', '-y', '--no-install-recommends', pkg]]) {
      if (await executable(path)) break;
      log(`${who}: apt-get ${args.join(' ')} (${path} is missing)`);
      const r = await aptGet(args);
      if (r.code !== 0)
        throw new Error(
          `apt-get ${args.join(' ')} failed (exit ${r.code}); install Debian's ${pkg} by hand:\n${r.out.slice(-4000)}`,
        );
    }
  } finally {
    await rmdir(lock).catch(() => undefined);
  }
  if (!(await executable(path))) throw new Error(`apt-get installed ${pkg} but ${path} is still missing`);
  return path;
}
