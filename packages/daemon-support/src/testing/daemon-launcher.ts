// The one launcher of the daemons that the benchmarks and the test suites start: `node <script>`,
// readiness by its `{"msg":"listening","url":…}` log line, output to a file or captured line by
// line, a bounded idempotent stop, and no daemon outliving the process that started it.
//
// node:child_process rather than execa: the benchmark's output goes to a file descriptor the kernel
// writes (no pipe for the runner to read), the exit code and signal come straight from the `exit`
// event, and daemon-support, a dependency of the daemons themselves, gains no package for its test
// tooling.
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import { CapturedOutput, FileOutput } from './daemon-output.js';
import type { CapturedLine } from './daemon-output.js';
import { CapturedDaemon, FileLoggedDaemon, DaemonStartError } from './launched-daemon.js';
import type { DaemonExit, LaunchedDaemon } from './launched-daemon.js';

export { parseJsonLine, readJsonLines } from './daemon-output.js';
export type { CapturedLine, JsonLine } from './daemon-output.js';
export { CapturedDaemon, DaemonStartError, FileLoggedDaemon, LaunchedDaemon } from './launched-daemon.js';
export type { DaemonExit, DaemonState } from './launched-daemon.js';

/**
 * Where stdout and stderr go. `{ file }`: appended to that file by the kernel, read only when asked
 * (`logs()`, `tail()`): the benchmarks, whose runner must not spend CPU on pipes. `'capture'`:
 * read line by line into `lines` (raw text, parsed JSON, stream, time): the test suites.
 */
export type OutputSpec = 'capture' | { file: string };

export interface DaemonSpec<O extends OutputSpec = OutputSpec> {
  /** Label in captured lines and error messages. */
  name: string;
  /** Script run with this process's `node`. */
  script: string;
  args?: readonly string[];
  output: O;
  /** Set over the base environment. */
  env?: Readonly<Record<string, string>>;
  /**
   * `inherit`: this process's environment; `minimal`: PATH and HOME only (the benchmarks, so that
   * nothing of the runner's shell changes what is measured). @default 'inherit'
   */
  envMode?: 'inherit' | 'minimal';
  /** Working directory (a daemon's engines inherit it). @default this process's */
  cwd?: string;
  /**
   * Command the daemon runs under, e.g. `['ip', 'netns', 'exec', ns]`. It must exec in place, so that
   * the pid stays the daemon's. @default none
   */
  wrap?: readonly string[];
  /**
   * Run under `setpriv --pdeathsig SIGKILL` when setpriv exists (it execs in place): a launcher
   * killed by a signal (a test worker past its timeout) then takes its daemons with it instead of
   * leaving them to hold ports, caches and engines. @default true
   */
  pdeathsig?: boolean;
  /** Raise the open-file limit first (`bash -c 'ulimit -n N && exec node …'`). @default unchanged */
  nofile?: number;
  /** Flags for `node` itself, before the script (e.g. `--cpu-prof`). */
  nodeFlags?: readonly string[];
}

export interface LaunchOptions {
  /** Wait for the `listening` line before resolving. @default true */
  waitListening?: boolean;
  /** How long to wait for it; then the daemon is SIGKILLed and the launch throws. @default 60000 */
  timeoutMs?: number;
}

const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'];

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** argv of the whole command: wrap, then setpriv, then (bash for ulimit, then) node. */
export function daemonArgv(spec: DaemonSpec): string[] {
  const node = [process.execPath, ...(spec.nodeFlags ?? []), spec.script, ...(spec.args ?? [])];
  const payload =
    spec.nofile === undefined
      ? node
      : ['bash', '-c', `ulimit -n ${spec.nofile} && exec ${node.map(shellQuote).join(' ')}`];
  const setpriv = spec.pdeathsig === false ? undefined : SETPRIV.find((p) => existsSync(p));
  const guard = setpriv === undefined ? [] : [setpriv, '--pdeathsig', 'SIGKILL', '--'];
  return [...(spec.wrap ?? []), ...guard, ...payload];
}

function daemonEnv(spec: DaemonSpec): Record<string, string | undefined> {
  const base =
    spec.envMode === 'minimal'
      ? { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp' }
      : process.env;
  return { ...base, ...spec.env };
}

type Spawned = { child: ChildProcess & { pid: number }; spawnedAt: number; spawnedAtWall: number };

async function spawnDaemonProcess(spec: DaemonSpec, stdio: StdioOptions): Promise<Spawned> {
  const [file, ...args] = daemonArgv(spec) as [string, ...string[]];
  const spawnedAt = performance.now();
  const spawnedAtWall = Date.now();
  const child = spawn(file, args, {
    env: daemonEnv(spec),
    stdio,
    ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {}),
  });
  if (child.pid === undefined) {
    // the spawn itself failed (no such wrap command, bad cwd): node reports it as an 'error' event
    const err = await new Promise<Error>((resolve) => child.once('error', resolve));
    throw new DaemonStartError(spec.name, `could not be spawned (${err.message})`, undefined, '');
  }
  return { child: child as ChildProcess & { pid: number }, spawnedAt, spawnedAtWall };
}

function start(spec: DaemonSpec<'capture'>): Promise<CapturedDaemon>;
function start(spec: DaemonSpec<{ file: string }>): Promise<FileLoggedDaemon>;
function start(spec: DaemonSpec): Promise<LaunchedDaemon>;
async function start(spec: DaemonSpec): Promise<LaunchedDaemon> {
  // Between the spawn and the daemon object only microtasks run, no I/O callback: its exit and its
  // first lines cannot be missed (unread pipe data waits in the stream until `attach`).
  if (spec.output === 'capture') {
    const output = new CapturedOutput(spec.name);
    const s = await spawnDaemonProcess(spec, ['ignore', 'pipe', 'pipe']);
    output.attach('stdout', s.child.stdout);
    output.attach('stderr', s.child.stderr);
    return new CapturedDaemon(spec.name, s.child, output, s.spawnedAt, s.spawnedAtWall);
  }
  const output = new FileOutput(spec.output.file);
  const fd = openSync(output.path, 'a');
  try {
    const s = await spawnDaemonProcess(spec, ['ignore', fd, fd]);
    return new FileLoggedDaemon(spec.name, s.child, output, s.spawnedAt, s.spawnedAtWall);
  } finally {
    // the child holds its own copy
    closeSync(fd);
  }
}

/**
 * Starts a daemon and, unless `waitListening: false`, resolves once it logged `listening` with a URL
 * (then `url` is set). Throws DaemonStartError when it cannot be spawned, exits first, or stays
 * silent past `timeoutMs` (then it is SIGKILLed first).
 */
export function launchDaemon(spec: DaemonSpec<'capture'>, options?: LaunchOptions): Promise<CapturedDaemon>;
export function launchDaemon(spec: DaemonSpec<{ file: string }>, options?: LaunchOptions): Promise<FileLoggedDaemon>;
export function launchDaemon(spec: DaemonSpec, options?: LaunchOptions): Promise<LaunchedDaemon>;
export async function launchDaemon(spec: DaemonSpec, options: LaunchOptions = {}): Promise<LaunchedDaemon> {
  const daemon = await start(spec);
  if (options.waitListening !== false) await daemon.waitListening(options.timeoutMs ?? 60_000);
  return daemon;
}

/** What a daemon expected to refuse to start did. */
export interface RunToExitResult {
  exit: DaemonExit;
  lines: readonly CapturedLine[];
  /** Whether it logged `listening` before it exited (it should not have). */
  listened: boolean;
}

/**
 * Runs a daemon that is expected to refuse to start (bad config, port taken): resolves with its
 * exit and every line it wrote. SIGKILLed after `timeoutMs` if it keeps running.
 */
export async function runToExit(spec: DaemonSpec<'capture'>, options: { timeoutMs: number }): Promise<RunToExitResult> {
  const daemon = await start(spec);
  const timer = setTimeout(() => daemon.signal('SIGKILL'), options.timeoutMs);
  const exit = await daemon.exited;
  clearTimeout(timer);
  return { exit, lines: daemon.lines, listened: daemon.logs().some((l) => l.msg === 'listening') };
}
