import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { repoRoot, testCacheDir } from '@llama-orch/engine-provisioner';

/**
 * Test support for process-level tests: the built daemon (`dist/main.js`) as a real child process.
 * Reads process.env on purpose (test entry point).
 */
export const APP_DIR = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
export const MAIN = join(APP_DIR, 'dist', 'main.js');

/**
 * `tsc --build` of the app (incremental), one build at a time across test files running in
 * parallel: a daemon spawned by one file must never read a file the other one is rewriting.
 */
export async function buildDist(): Promise<void> {
  const lock = join(APP_DIR, 'dist', '.test-build.lock');
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    try {
      closeSync(openSync(lock, 'wx'));
      break;
    } catch {
      // Held by another file's build; a lock older than the deadline is a crashed run's.
      const st = statSync(lock, { throwIfNoEntry: false });
      if (st !== undefined && Date.now() - st.mtimeMs > 10 * 60_000) rmSync(lock, { force: true });
      if (Date.now() > deadline) throw new Error('timed out waiting for the dist build lock');
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    await execa('npx', ['tsc', '--build', APP_DIR], { cwd: repoRoot(), stdio: 'inherit' });
  } finally {
    rmSync(lock, { force: true });
  }
}

export interface DaemonChild {
  child: ChildProcess;
  /** Parsed stdout lines (only when stdout is read). */
  lines: Array<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: string | null }>;
  /** SIGKILL if still running, then wait for the exit (cleanup). */
  kill(): Promise<void>;
}

/**
 * Spawns `dist/main.js --config <path>` with the shared test cache, `token` and `env`. `stdout`: `read`
 * parses every line into {@link DaemonChild.lines}; `unread` pipes it and never reads it.
 */
export function spawnDaemon(
  configPath: string,
  opts: {
    token: string;
    stdout: 'read' | 'unread';
    logLevel?: string;
    /** More variables for the daemon; `undefined` removes one it would inherit. */
    env?: Readonly<Record<string, string | undefined>>;
  },
): DaemonChild {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LLORCH_CACHE_DIR: testCacheDir(),
    LLORCH_API_TOKEN: opts.token,
    LOG_LEVEL: opts.logLevel ?? 'info',
    ...opts.env,
  };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  const child = spawn(process.execPath, [MAIN, '--config', configPath], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const lines: Array<Record<string, unknown>> = [];
  if (opts.stdout === 'read') {
    const rl = createInterface({ input: child.stdout! });
    rl.on('line', (line) => {
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        lines.push({ raw: line });
      }
    });
    // The reader may be destroyed on purpose (a dying terminal); that is not a test failure.
    child.stdout!.on('error', () => undefined);
  } else {
    child.stdout!.pause();
  }
  return {
    child,
    lines,
    exited,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** The first line with `msg`, waiting up to `ms`; rejects when the daemon exits first. */
export async function lineWith(d: DaemonChild, msg: string, ms = 60_000): Promise<Record<string, unknown>> {
  const end = Date.now() + ms;
  let gone = false;
  void d.exited.then(() => {
    gone = true;
  });
  for (;;) {
    const found = d.lines.find((l) => l.msg === msg);
    if (found !== undefined) return found;
    if (gone) throw new Error(`daemon exited before logging '${msg}': ${JSON.stringify(d.lines.slice(-5))}`);
    if (Date.now() > end) throw new Error(`timed out waiting for '${msg}'`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
