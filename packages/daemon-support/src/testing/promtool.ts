import { execFile, spawn } from 'node:child_process';
import { access, constants, mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface FindPromtoolOptions {
  /** Where a promtool extracted from Debian's package is kept between runs. @default `<tmpdir>/llama-orch-promtool` */
  dir?: string;
  /** `PATH` to search first. @default process.env.PATH */
  path?: string;
  /** Progress lines (a download takes seconds). @default stderr */
  log?: (line: string) => void;
  /** Whether this process may run `apt-get update` (root only) when the package lists lack `prometheus`. @default process.getuid() === 0 */
  canUpdate?: boolean;
}

async function executable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}

/**
 * Prometheus' own `promtool`, for the tests that run `promtool check metrics` on a daemon's real
 * scrape: the one on `PATH`, else one extracted earlier into `dir`, else Debian's `prometheus`
 * package fetched with `apt-get download` and unpacked with `dpkg-deb -x` into `dir` (no
 * installation, so no Prometheus service is set up or started; `apt-get update` first, as root,
 * when the lists lack the package). Never a download from anywhere but Debian's mirrors. Resolves
 * `{ unavailable: reason }` when none can be had: the caller skips and shows the reason.
 */
export async function findPromtool(
  opts: FindPromtoolOptions = {},
): Promise<{ path: string } | { unavailable: string }> {
  for (const d of (opts.path ?? process.env.PATH ?? '').split(delimiter)) {
    if (d !== '' && (await executable(join(d, 'promtool')))) return { path: join(d, 'promtool') };
  }
  const dir = opts.dir ?? join(tmpdir(), 'llama-orch-promtool');
  const extracted = join(dir, 'root', 'usr', 'bin', 'promtool');
  if (await executable(extracted)) return { path: extracted };
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const canUpdate = opts.canUpdate ?? process.getuid?.() === 0;
  await mkdir(dir, { recursive: true });
  const work = await mkdtemp(join(dir, '.fetch-'));
  try {
    const download = () =>
      run('apt-get', ['download', 'prometheus'], {
        cwd: work,
        env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      });
    log(`promtool tests: apt-get download prometheus (no promtool on PATH or in ${dir})`);
    try {
      await download();
    } catch (first) {
      if (!canUpdate)
        return {
          unavailable: `no promtool: apt-get download prometheus failed (${firstLine(first)}) and this process is not root, so it cannot run apt-get update; install Debian's prometheus (promtool) by hand`,
        };
      log('promtool tests: apt-get update, then download again');
      await run('apt-get', ['update'], { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
      await download();
    }
    const deb = (await readdir(work)).find((f) => f.endsWith('.deb'));
    if (deb === undefined) return { unavailable: 'no promtool: apt-get download prometheus left no .deb' };
    await run('dpkg-deb', ['-x', join(work, deb), join(work, 'root')]);
    if (!(await executable(join(work, 'root', 'usr', 'bin', 'promtool'))))
      return { unavailable: `no promtool: Debian's ${deb} has no usr/bin/promtool` };
    // Renamed into place whole, so a concurrent test file sees all of it or none.
    await rename(join(work, 'root'), join(dir, 'root')).catch(async (err: NodeJS.ErrnoException) => {
      if (!(await executable(extracted))) throw err;
    });
    return { path: extracted };
  } catch (err) {
    return { unavailable: `no promtool: ${firstLine(err)}` };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

function firstLine(err: unknown): string {
  const e = err as { stderr?: string; message?: string };
  return (e.stderr?.trim() || e.message || String(err)).split('\n')[0] ?? '';
}

/** `promtool check metrics` over `text` (stdin): its exit code and everything it printed (one line per problem). */
export function promtoolCheckMetrics(promtool: string, text: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(promtool, ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (b: Buffer) => {
      output += b.toString();
    });
    child.stderr.on('data', (b: Buffer) => {
      output += b.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output: output.trim() }));
    child.stdin.end(text);
  });
}
