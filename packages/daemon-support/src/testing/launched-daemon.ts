// A daemon process started by the launcher: its lifecycle (state, exit, signals, a bounded stop)
// and its output, read back through the output it was started with.
import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CapturedLine, CapturedOutput, DaemonOutput, FileOutput, JsonLine } from './daemon-output.js';

/** How a daemon process ended. */
export interface DaemonExit {
  /** Exit code; undefined when a signal ended it. */
  code: number | undefined;
  signal: NodeJS.Signals | undefined;
}

/**
 * `running` from spawn; `stopping` once stop() sent its signal; `exited` once the process is gone
 * (its output may still be draining: await `exited` for every line).
 */
export type DaemonState = 'running' | 'stopping' | 'exited';

/** A daemon that has not logged `listening` in time, or exited before it did. */
export class DaemonStartError extends Error {
  override readonly name = 'DaemonStartError';
  readonly code = 'DAEMON_START';
  /** The daemon's name. */
  readonly daemon: string;
  /** How it ended; undefined when it was still running at the deadline (it has been SIGKILLed since). */
  readonly exit: DaemonExit | undefined;
  /** Its last output lines (also in the message). */
  readonly tail: string;

  constructor(daemon: string, reason: string, exit: DaemonExit | undefined, tail: string) {
    super(`${daemon} ${reason}:\n${tail}`);
    this.daemon = daemon;
    this.exit = exit;
    this.tail = tail;
  }
}

/**
 * Children still running, killed when this process exits. Module state because what it guards is
 * one per process: one `exit` listener for every child, rather than one each (past ten daemons
 * that trips Node's max-listeners warning). A signal that kills this process runs no listener:
 * `pdeathsig` covers that case.
 */
const running = new Set<ChildProcess>();
let exitHookInstalled = false;

function killOnParentExit(child: ChildProcess): void {
  running.add(child);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const c of running) {
      // SIGCONT first: a stopped child would otherwise linger in the process table until continued
      c.kill('SIGCONT');
      c.kill('SIGKILL');
    }
  });
}

/** How long `exited` waits, after the exit, for the last captured lines. */
const DRAIN_BOUND_MS = 2000;

/** What every launched daemon offers, whatever its output. */
export abstract class LaunchedDaemon {
  readonly name: string;
  readonly pid: number;
  /** `performance.now()` just before spawn. */
  readonly spawnedAt: number;
  /** Wall clock (ms) just before spawn, to compare with pino's `time`. */
  readonly spawnedAtWall: number;
  /** Resolves once the process exited and its output was read (bounded). Never rejects. */
  readonly exited: Promise<DaemonExit>;
  readonly #child: ChildProcess;
  readonly #output: DaemonOutput;
  #state: DaemonState = 'running';
  #exit: DaemonExit | undefined;
  #url = '';
  #stopping: Promise<DaemonExit> | undefined;

  protected constructor(
    name: string,
    child: ChildProcess & { pid: number },
    output: DaemonOutput,
    spawnedAt: number,
    spawnedAtWall: number,
  ) {
    this.name = name;
    this.pid = child.pid;
    this.spawnedAt = spawnedAt;
    this.spawnedAtWall = spawnedAtWall;
    this.#child = child;
    this.#output = output;
    killOnParentExit(child);
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        running.delete(child);
        this.#state = 'exited';
        const exit = { code: code ?? undefined, signal: signal ?? undefined };
        this.#exit = exit;
        void output.drained(DRAIN_BOUND_MS).then(() => resolve(exit));
      });
    });
  }

  get state(): DaemonState {
    return this.#state;
  }

  /** How it ended; undefined while it runs. */
  get exit(): DaemonExit | undefined {
    return this.#exit;
  }

  /** Base URL from its `{"msg":"listening","url":…}` line; '' until waitListening() saw it. */
  get url(): string {
    return this.#url;
  }

  alive(): boolean {
    return this.#exit === undefined;
  }

  /** Every JSON line it wrote so far (a file is read now). */
  logs(): JsonLine[] {
    return this.#output.jsonLines();
  }

  /** Its last `lines` output lines, for messages. */
  tail(lines = 40): string {
    return this.#output.tail(lines);
  }

  /** Sends `sig` unless it has exited. */
  signal(sig: NodeJS.Signals): void {
    if (this.alive()) this.#child.kill(sig);
  }

  /**
   * Polls its output every `everyMs` until the `listening` line (then sets `url` and returns it).
   * Throws DaemonStartError when it exits first, or SIGKILLs it and throws after `timeoutMs`.
   */
  async waitListening(timeoutMs: number, everyMs = 10): Promise<string> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const seen = this.logs().find((l) => l.msg === 'listening' && typeof l.url === 'string');
      if (seen !== undefined) {
        this.#url = seen.url as string;
        return this.#url;
      }
      if (!this.alive()) {
        const exit = await this.exited;
        throw new DaemonStartError(
          this.name,
          `exited (${exit.code ?? exit.signal}) before listening`,
          exit,
          this.tail(),
        );
      }
      if (performance.now() > deadline) {
        this.#child.kill('SIGKILL');
        await this.exited;
        throw new DaemonStartError(this.name, `did not log 'listening' within ${timeoutMs} ms`, undefined, this.tail());
      }
      await sleep(everyMs);
    }
  }

  /**
   * SIGCONT (a SIGSTOPped process cannot act on anything else), then `sig`, then SIGKILL after
   * `graceMs`. Resolves with the exit once its output is read. Idempotent: a second call returns the
   * first call's promise, whatever its arguments.
   */
  stop(sig: NodeJS.Signals = 'SIGTERM', graceMs = 20_000): Promise<DaemonExit> {
    this.#stopping ??= (async () => {
      if (!this.alive()) return this.exited;
      this.#state = 'stopping';
      this.#child.kill('SIGCONT');
      this.#child.kill(sig);
      const timer = setTimeout(() => this.#child.kill('SIGKILL'), graceMs);
      timer.unref();
      const exit = await this.exited;
      clearTimeout(timer);
      return exit;
    })();
    return this.#stopping;
  }
}

/** A daemon whose output the launcher reads line by line (the test suites). */
export class CapturedDaemon extends LaunchedDaemon {
  readonly #output: CapturedOutput;

  constructor(
    name: string,
    child: ChildProcess & { pid: number },
    output: CapturedOutput,
    spawnedAt: number,
    spawnedAtWall: number,
  ) {
    super(name, child, output, spawnedAt, spawnedAtWall);
    this.#output = output;
  }

  /** Every line it wrote (stdout and stderr, JSON or not), in arrival order; grows as it runs. */
  get lines(): readonly CapturedLine[] {
    return this.#output.lines;
  }
}

/** A daemon whose output the kernel appends to a file (the benchmarks). */
export class FileLoggedDaemon extends LaunchedDaemon {
  readonly logFile: string;

  constructor(
    name: string,
    child: ChildProcess & { pid: number },
    output: FileOutput,
    spawnedAt: number,
    spawnedAtWall: number,
  ) {
    super(name, child, output, spawnedAt, spawnedAtWall);
    this.logFile = output.path;
  }
}
