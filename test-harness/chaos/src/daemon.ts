import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { execa, type ResultPromise } from 'execa';

/** One line a daemon wrote (stdout or stderr), raw, with its JSON form when it parsed. */
export interface CapturedLine {
  source: string;
  stream: 'stdout' | 'stderr';
  at: number;
  text: string;
  json: Record<string, unknown> | undefined;
}

/** How a daemon process ended. */
export interface DaemonExit {
  code: number | undefined;
  signal: string | undefined;
}

export interface DaemonSpec {
  /** Label in captured lines and error messages. */
  name: string;
  /** `node` script (a built `apps/<app>/dist/main.js`). */
  script: string;
  args: string[];
  /** Merged over the parent environment. */
  env: Record<string, string>;
  /** Working directory (engines inherit it, which is how the orphan check recognises ours). */
  cwd?: string;
  /**
   * Command the daemon runs under, e.g. `['ip', 'netns', 'exec', ns]` (the partition tests). It must
   * exec in place, so that the pid stays the daemon's. @default none
   */
  wrap?: readonly string[];
}

/**
 * A daemon started by the suite: every output line is captured (the token-leak check reads them
 * all, not only JSON), exit is observable, and stop escalates to SIGKILL.
 */
export interface ChaosDaemon {
  readonly name: string;
  readonly pid: number;
  /** Base URL from its `{"msg":"listening","url":…}` line. */
  readonly url: string;
  readonly lines: CapturedLine[];
  readonly exited: Promise<DaemonExit>;
  alive(): boolean;
  signal(sig: NodeJS.Signals): void;
  /** SIGTERM (or `sig`), SIGKILL after `graceMs`; resolves with the exit. Idempotent. */
  stop(sig?: NodeJS.Signals, graceMs?: number): Promise<DaemonExit>;
}

/**
 * `setpriv --pdeathsig SIGKILL --` when available (it execs in place, the pid stays the daemon's):
 * a test worker that is killed (hook timeout, crash) then takes its daemons with it instead of
 * leaving them to hold ports, cache locks and engines.
 */
const PDEATHSIG: readonly string[] = ['/usr/bin/setpriv', '/bin/setpriv'].some((p) => existsSync(p))
  ? ['setpriv', '--pdeathsig', 'SIGKILL', '--']
  : [];

function spawn(spec: DaemonSpec, sink: CapturedLine[]): { child: ResultPromise; exited: Promise<DaemonExit> } {
  const [file = 'node', ...prefix] = [...(spec.wrap ?? []), ...PDEATHSIG, 'node'];
  const child = execa(file, [...prefix, spec.script, ...spec.args], {
    env: { ...process.env, ...spec.env },
    ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {}),
    reject: false,
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
    buffer: false,
    cleanup: true,
    forceKillAfterDelay: false,
  });
  const capture = (stream: 'stdout' | 'stderr', input: NodeJS.ReadableStream | null): void => {
    if (input === null) return;
    createInterface({ input }).on('line', (text) => {
      let json: Record<string, unknown> | undefined;
      try {
        const parsed: unknown = JSON.parse(text);
        json =
          typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
            ? (parsed as Record<string, unknown>)
            : undefined;
      } catch {
        json = undefined;
      }
      sink.push({ source: spec.name, stream, at: Date.now(), text, json });
    });
  };
  capture('stdout', child.stdout);
  capture('stderr', child.stderr);
  const exited = child.then((r) => ({ code: r.exitCode, signal: r.signal }));
  return { child, exited };
}

/** Spawns a daemon and resolves once it logs `listening` with a URL; rejects if it exits first. */
export async function startChaosDaemon(spec: DaemonSpec, timeoutMs: number): Promise<ChaosDaemon> {
  const lines: CapturedLine[] = [];
  const { child, exited } = spawn(spec, lines);
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${spec.name}: spawn failed`);
  const tail = (): string =>
    lines
      .slice(-40)
      .map((l) => l.text)
      .join('\n');
  const started = Date.now();
  let url: string | undefined;
  let exit: DaemonExit | undefined;
  void exited.then((e) => {
    exit = e;
  });
  while (url === undefined) {
    const seen = lines.find((l) => l.json?.msg === 'listening' && typeof l.json.url === 'string');
    if (seen !== undefined) url = String(seen.json?.url);
    else if (exit !== undefined)
      throw new Error(`${spec.name} exited (${exit.code ?? exit.signal}) before listening:\n${tail()}`);
    else if (Date.now() - started > timeoutMs) {
      child.kill('SIGKILL');
      await exited;
      throw new Error(`${spec.name} did not listen within ${timeoutMs} ms:\n${tail()}`);
    } else await new Promise((r) => setTimeout(r, 25));
  }
  let stopping: Promise<DaemonExit> | undefined;
  const daemon: ChaosDaemon = {
    name: spec.name,
    pid,
    url,
    lines,
    exited,
    alive: () => exit === undefined,
    signal: (sig) => {
      if (exit === undefined) child.kill(sig);
    },
    stop: (sig = 'SIGTERM', graceMs = 20_000) => {
      stopping ??= (async () => {
        if (exit !== undefined) return exit;
        // A stopped (SIGSTOP) process cannot act on SIGTERM.
        child.kill('SIGCONT');
        child.kill(sig);
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        const e = await exited;
        clearTimeout(timer);
        return e;
      })();
      return stopping;
    },
  };
  return daemon;
}

/** Runs a daemon that is expected to refuse to start: resolves with its exit and every line. */
export async function runToExit(
  spec: DaemonSpec,
  timeoutMs: number,
): Promise<{ exit: DaemonExit; lines: CapturedLine[]; listened: boolean }> {
  const lines: CapturedLine[] = [];
  const { child, exited } = spawn(spec, lines);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const exit = await exited;
  clearTimeout(timer);
  // readline may still hold the last lines for a tick after exit
  await new Promise((r) => setTimeout(r, 50));
  return { exit, lines, listened: lines.some((l) => l.json?.msg === 'listening') };
}
