import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { DaemonStartError } from '../errors.js';

/** One JSON log line of a daemon (pino). */
export type LogLine = Record<string, unknown> & { msg?: string; time?: number };

export type DaemonState = 'running' | 'stopping' | 'exited';

export interface SpawnDaemonOptions {
  /** Label for messages. */
  name: string;
  /** Script run with `node`. */
  script: string;
  args?: readonly string[];
  /** Merged over a minimal environment (PATH, HOME). */
  env?: Readonly<Record<string, string>>;
  /** stdout+stderr go to this file (the kernel writes it; the runner reads it only when asked). */
  logFile: string;
  /** Raise the open-file limit first (`bash -c 'ulimit -n N; exec node …'`). */
  nofile?: number;
  /** Extra `node` flags (e.g. `--cpu-prof`). */
  nodeFlags?: readonly string[];
  /** Resolve only after `{"msg":"listening","url":…}` appears in the log. @default true */
  waitListening?: boolean;
  /** @default 60000 */
  timeoutMs?: number;
}

/** Processes started by this runner, killed if the runner dies. */
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of live) {
      try {
        // A stopped (SIGSTOP) child ignores SIGKILL? No: SIGKILL always works; SIGCONT for safety.
        child.kill('SIGCONT');
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

/** Reads the JSON lines of a log file (non-JSON lines are skipped). */
export function readLogLines(file: string): LogLine[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const out: LogLine[] = [];
  for (const raw of text.split('\n')) {
    if (!raw.startsWith('{')) continue;
    try {
      out.push(JSON.parse(raw) as LogLine);
    } catch {
      // a line being written right now
    }
  }
  return out;
}

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/** A node process started by the benchmark, with its log in a file. */
export class Daemon {
  readonly name: string;
  readonly child: ChildProcess;
  readonly logFile: string;
  /** `performance.now()` just before spawn. */
  readonly spawnedAt: number;
  /** Wall clock (ms) just before spawn, to compare with pino `time`. */
  readonly spawnedAtWall: number;
  url = '';
  #state: DaemonState = 'running';
  #exited: Promise<void>;
  #stopping: Promise<void> | undefined;

  constructor(name: string, child: ChildProcess, logFile: string, spawnedAt: number, spawnedAtWall: number) {
    this.name = name;
    this.child = child;
    this.logFile = logFile;
    this.spawnedAt = spawnedAt;
    this.spawnedAtWall = spawnedAtWall;
    this.#exited = new Promise((resolve) => {
      child.once('exit', () => {
        this.#state = 'exited';
        live.delete(child);
        resolve();
      });
    });
  }

  get state(): DaemonState {
    return this.#state;
  }

  get pid(): number {
    return this.child.pid as number;
  }

  get exited(): Promise<void> {
    return this.#exited;
  }

  logs(): LogLine[] {
    return readLogLines(this.logFile);
  }

  tail(lines = 30): string {
    return tail(this.logFile, lines);
  }

  signal(sig: NodeJS.Signals): void {
    if (this.#state !== 'exited') this.child.kill(sig);
  }

  /** SIGTERM, then SIGKILL after `timeoutMs`. Idempotent. */
  stop(timeoutMs = 15_000): Promise<void> {
    this.#stopping ??= (async () => {
      if (this.#state === 'exited') return;
      this.#state = 'stopping';
      this.child.kill('SIGCONT');
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
      timer.unref();
      await this.#exited;
      clearTimeout(timer);
    })();
    return this.#stopping;
  }
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Spawns `node <script>` with its output in a log file and waits for its `listening` line. */
export async function spawnDaemon(o: SpawnDaemonOptions): Promise<Daemon> {
  installExitHook();
  const fd = openSync(o.logFile, 'a');
  const nodeArgv = [...(o.nodeFlags ?? []), o.script, ...(o.args ?? [])];
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    ...(o.env ?? {}),
  };
  const spawnedAt = performance.now();
  const spawnedAtWall = Date.now();
  const child =
    o.nofile === undefined
      ? spawn(process.execPath, nodeArgv, { env, stdio: ['ignore', fd, fd] })
      : spawn(
          'bash',
          ['-c', `ulimit -n ${o.nofile} && exec ${[process.execPath, ...nodeArgv].map(shellQuote).join(' ')}`],
          { env, stdio: ['ignore', fd, fd] },
        );
  closeSync(fd);
  live.add(child);
  const daemon = new Daemon(o.name, child, o.logFile, spawnedAt, spawnedAtWall);
  if (o.waitListening === false) return daemon;
  const deadline = performance.now() + (o.timeoutMs ?? 60_000);
  while (performance.now() < deadline) {
    if (daemon.state === 'exited') {
      throw new DaemonStartError(`${o.name} exited before listening:\n${daemon.tail()}`);
    }
    const listening = daemon.logs().find((l) => l.msg === 'listening' && typeof l.url === 'string');
    if (listening !== undefined) {
      daemon.url = listening.url as string;
      return daemon;
    }
    await sleep(10);
  }
  child.kill('SIGKILL');
  throw new DaemonStartError(`${o.name} did not log 'listening' within ${o.timeoutMs ?? 60_000} ms:\n${daemon.tail()}`);
}
