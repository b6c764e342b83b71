import { rmSync, watch, type FSWatcher } from 'node:fs';
import { execa, type ResultPromise } from 'execa';
import type { Logger } from 'pino';
import type { EngineHealth } from '@llama-orch/llamacpp-adapter';
import { EngineReadinessError, EngineSpawnError } from '../errors.js';
import { readFileSince, RotatingLogFile, type RotatingLogOptions } from '../support/rotating-log.js';
import { removePidFile, writePidFile } from '../support/pid-files.js';

/** How the process ended. `requested` = ended by {@link EngineProcess.stop}. */
export interface EngineExit {
  code: number | null;
  signal: string | null;
  requested: boolean;
  at: number;
}

export type EngineProcessState = 'idle' | 'loading' | 'ready' | 'stopping' | 'exited';

export interface EngineProcessOptions {
  /** `<pool_id>-<replica_id>`: names the log and PID files. */
  name: string;
  poolId: string;
  replicaId: string;
  binaryPath: string;
  /** Complete argv after the binary. */
  args: readonly string[];
  /** The whole environment of the child (already scrubbed); nothing is inherited. */
  env: Readonly<Record<string, string>>;
  /** Probe used for readiness (the engine's `GET /health`). */
  health: (signal: AbortSignal) => Promise<EngineHealth>;
  /** `<runtime_dir>/logs`. */
  logDir: string;
  /** `<runtime_dir>/pids`. */
  pidDir: string;
  logger: Logger;
  /**
   * Command prefix that execs the engine in place, e.g. `['/usr/bin/setpriv', '--pdeathsig',
   * 'SIGKILL', '--']` so the kernel kills the engine when pool-managerd dies. @default [] (none)
   */
  wrapper?: readonly string[];
  /** Longest time from spawn to `/health` 200, ms. @default 120000 */
  readinessTimeoutMs?: number;
  /** `/health` poll interval while loading, ms. @default 50 */
  readinessIntervalMs?: number;
  /**
   * Output that announces the engine is about to answer (llama-server prints `listening on http://…`
   * after the model loaded): seeing it probes `/health` at once instead of at the next poll tick.
   * Only a hint — readiness is still a real `/health` 200. @default /listening on http/
   */
  readyHint?: RegExp;
  /** Called synchronously once the process exists (before its PID file is written). */
  onSpawn?: (pid: number) => void;
  log?: RotatingLogOptions;
}

const TAIL_BYTES = 4096;
const READY_HINT = /listening on http/;
/** How long after the ready hint `/health` is polled every 5 ms, ms. */
const HINT_FAST_POLL_MS = 500;
/** How often a running engine's log is checked for rotation (it writes the file itself), ms. */
const ROTATE_CHECK_MS = 5000;
/** Most of the log read at once while looking for the ready hint. */
const HINT_SCAN_BYTES = 64 * 1024;

/**
 * One `llama-server` process: explicit argv and env, its stdout and stderr the descriptor of a
 * rotating log file (the engine writes its lines itself: pool-managerd's event loop never wakes for
 * them, and a busy pool-managerd can never block an engine on a full pipe), a PID file while it
 * runs, readiness by polling `/health` (refused → 503 → 200), exit code/signal recorded. A process
 * is started once; restarts create a new instance (a process that failed readiness is never reused).
 */
export class EngineProcess {
  readonly name: string;
  readonly #poolId: string;
  readonly #replicaId: string;
  readonly #binaryPath: string;
  readonly #args: readonly string[];
  readonly #env: Readonly<Record<string, string>>;
  readonly #health: (signal: AbortSignal) => Promise<EngineHealth>;
  readonly #logDir: string;
  readonly #pidDir: string;
  readonly #log: Logger;
  readonly #wrapper: readonly string[];
  readonly #readinessTimeoutMs: number;
  readonly #readinessIntervalMs: number;
  readonly #readyHint: RegExp;
  readonly #onSpawn: ((pid: number) => void) | undefined;
  readonly #logRotation: RotatingLogOptions | undefined;
  #state: EngineProcessState = 'idle';
  #child: ResultPromise | undefined;
  #exit: EngineExit | undefined;
  #stopRequested = false;
  #stopping: Promise<EngineExit> | undefined;
  #pidPath: string | undefined;
  /** Where this process's output starts in its log file (after the spawn line). */
  #outputStart = 0;
  /** The end of the output, read when the process exited (before the exit line is appended). */
  #finalTail: string | undefined;
  /** Why the spawn itself failed (no output then). */
  #spawnError: string | undefined;
  /** Ends the readiness loop's current wait early (set while it sleeps between probes). */
  #wake: (() => void) | undefined;
  /** When the ready hint was seen (Date.now()), if it was. */
  #hintedAt: number | undefined;
  /** Reads new output for the ready hint (set while loading). */
  #scanHint: (() => void) | undefined;
  readonly #exitListeners = new Set<(exit: EngineExit) => void>();
  readonly exited: Promise<EngineExit>;
  #resolveExited!: (exit: EngineExit) => void;

  constructor({
    name,
    poolId,
    replicaId,
    binaryPath,
    args,
    env,
    health,
    logDir,
    pidDir,
    logger,
    wrapper = [],
    readinessTimeoutMs = 120_000,
    readinessIntervalMs = 50,
    readyHint = READY_HINT,
    onSpawn,
    log,
  }: EngineProcessOptions) {
    this.name = name;
    this.#poolId = poolId;
    this.#replicaId = replicaId;
    this.#binaryPath = binaryPath;
    this.#args = args;
    this.#env = env;
    this.#health = health;
    this.#logDir = logDir;
    this.#pidDir = pidDir;
    this.#log = logger;
    this.#wrapper = wrapper;
    this.#readinessTimeoutMs = readinessTimeoutMs;
    this.#readinessIntervalMs = readinessIntervalMs;
    this.#readyHint = readyHint;
    this.#onSpawn = onSpawn;
    this.#logRotation = log;
    this.exited = new Promise((resolve) => {
      this.#resolveExited = resolve;
    });
  }

  get state(): EngineProcessState {
    return this.#state;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  get exit(): EngineExit | undefined {
    return this.#exit;
  }

  get logPath(): string {
    return `${this.#logDir}/${this.name}.log`;
  }

  /** Last few KB of this process's output (why a load failed), read from its log file. */
  outputTail(): string {
    return this.#finalTail ?? readFileSince(this.logPath, this.#outputStart, TAIL_BYTES).text;
  }

  onExit(listener: (exit: EngineExit) => void): () => void {
    this.#exitListeners.add(listener);
    return () => this.#exitListeners.delete(listener);
  }

  /**
   * Spawns and waits for `/health` 200. Rejects with {@link EngineSpawnError} when the binary cannot
   * be started and {@link EngineReadinessError} when the process exits while loading or the timeout
   * passes (the process is then killed). Aborting `signal` stops the process.
   */
  async start(signal?: AbortSignal): Promise<void> {
    if (this.#state !== 'idle')
      throw new EngineSpawnError(`engine ${this.name} already started`, { state: this.#state });
    const binaryPath = this.#binaryPath;
    const log = new RotatingLogFile(this.logPath, this.#logRotation);
    const wrapper = this.#wrapper;
    const [file, ...prefix] = wrapper.length > 0 ? wrapper : [binaryPath];
    const args = wrapper.length > 0 ? [...prefix, binaryPath, ...this.#args] : [...this.#args];
    log.write(`\n=== ${new Date().toISOString()} spawn ${binaryPath} ${this.#args.join(' ')}\n`);
    this.#outputStart = log.size;
    this.#state = 'loading';
    // execa passes a descriptor number to the child as it is (its types list only 1, 2 and 3–9).
    const logFd = (log.fd ?? 'ignore') as 'ignore';
    const child = execa(file ?? binaryPath, args, {
      env: { ...this.#env },
      extendEnv: false,
      stdio: ['ignore', logFd, logFd],
      buffer: false,
      reject: false,
      cleanup: true,
      forceKillAfterDelay: false,
    });
    this.#child = child;
    const rotation = setInterval(() => {
      try {
        log.rotateIfOver();
      } catch (err) {
        this.#log.warn({ err, log: this.logPath }, 'engine log rotation failed');
      }
    }, ROTATE_CHECK_MS);
    rotation.unref();
    void child.then((result) => {
      clearInterval(rotation);
      if (child.pid === undefined) this.#spawnError = result.originalMessage ?? result.shortMessage;
      this.#finalTail = readFileSince(this.logPath, this.#outputStart, TAIL_BYTES).text;
      const exit: EngineExit = {
        code: result.exitCode ?? null,
        signal: result.signal ?? null,
        requested: this.#stopRequested,
        at: Date.now(),
      };
      this.#exit = exit;
      this.#state = 'exited';
      log.write(`=== ${new Date(exit.at).toISOString()} exit code=${exit.code} signal=${exit.signal}\n`);
      log.close();
      // Gone before anyone hears of the exit: a PID file always names a live engine (or a crash's orphan).
      // Synchronous on purpose: one tiny file, and listeners must not wait a thread-pool round trip.
      if (this.#pidPath !== undefined) rmSync(this.#pidPath, { force: true });
      this.#log.info(
        { pid: child.pid, code: exit.code, signal: exit.signal, requested: exit.requested },
        'engine exited',
      );
      this.#resolveExited(exit);
      this.#wake?.();
      for (const l of this.#exitListeners) l(exit);
    });
    if (child.pid === undefined) {
      const exit = await this.exited;
      throw new EngineSpawnError(`could not spawn ${binaryPath}: ${this.#spawnError ?? `exit ${exit.code}`}`, {
        binary: binaryPath,
      });
    }
    // Logged at the spawn itself (its time is the start of the engine's own start-up).
    this.#log.info({ pid: child.pid, binary: binaryPath, log: this.logPath }, 'engine spawned');
    this.#onSpawn?.(child.pid);
    this.#pidPath = await writePidFile(this.#pidDir, this.name, {
      pid: child.pid,
      pool_id: this.#poolId,
      replica_id: this.#replicaId,
      binary_path: binaryPath,
      started_at: new Date().toISOString(),
    });
    // The process may have exited while the PID file was written: then the exit handler missed it.
    if (this.#exit !== undefined) await removePidFile(this.#pidPath);
    const stopWatching = this.#watchForHint();
    try {
      await this.#waitReady(signal);
    } finally {
      stopWatching();
    }
  }

  /**
   * Looks for the ready hint in the output while the engine loads: at every change of its log file
   * (inotify, so the probe follows the announcement at once) and at every readiness tick (where the
   * file cannot be watched). Returns the stop.
   */
  #watchForHint(): () => void {
    let offset = this.#outputStart;
    // The hint may be split across two writes: the end of what was read is searched again.
    let carry = '';
    const scan = (): void => {
      if (this.#hintedAt !== undefined) return;
      const { text, end } = readFileSince(this.logPath, offset, HINT_SCAN_BYTES);
      offset = end;
      if (this.#readyHint.test(carry + text)) {
        this.#hintedAt = Date.now();
        this.#wake?.();
      }
      carry = (carry + text).slice(-256);
    };
    this.#scanHint = scan;
    let watcher: FSWatcher | undefined;
    try {
      watcher = watch(this.logPath, { persistent: false }, scan);
      watcher.on('error', () => watcher?.close());
    } catch {
      // No inotify here (limits, filesystem): the poll tick alone finds the hint.
    }
    return () => {
      this.#scanHint = undefined;
      watcher?.close();
    };
  }

  async #waitReady(signal: AbortSignal | undefined): Promise<void> {
    const timeoutMs = this.#readinessTimeoutMs;
    const intervalMs = this.#readinessIntervalMs;
    const deadline = Date.now() + timeoutMs;
    const started = Date.now();
    for (;;) {
      if (this.#exit !== undefined) {
        throw new EngineReadinessError(
          `engine exited during load (code ${this.#exit.code}, signal ${this.#exit.signal}): ${lastLines(this.outputTail())}`,
          {
            pid: this.pid,
            code: this.#exit.code,
            signal: this.#exit.signal,
          },
        );
      }
      if (signal?.aborted === true) {
        await this.stop('SIGKILL', 1000);
        throw new EngineReadinessError('engine start aborted', { pid: this.pid }, { cause: signal.reason });
      }
      if (Date.now() > deadline) {
        await this.stop('SIGKILL', 1000);
        throw new EngineReadinessError(`engine not healthy after ${timeoutMs} ms`, { pid: this.pid });
      }
      // A stop (the supervisor's signal) ends a probe in flight too: start() never outlives it by a probe.
      const probeTimeout = AbortSignal.timeout(Math.max(intervalMs * 20, 1000));
      const probeSignal = signal === undefined ? probeTimeout : AbortSignal.any([probeTimeout, signal]);
      let health: EngineHealth;
      try {
        health = await this.#health(probeSignal);
      } catch (err) {
        this.#log.debug({ err }, 'health probe failed while loading');
        health = 'down';
      }
      if (health === 'ready' && this.#exit === undefined) {
        this.#state = 'ready';
        this.#log.info({ pid: this.pid, ms: Date.now() - started }, 'engine healthy');
        return;
      }
      this.#scanHint?.();
      // Just after the hint the engine is about to answer: short pauses for a while, not full ticks.
      const hinted = this.#hintedAt !== undefined && Date.now() - this.#hintedAt < HINT_FAST_POLL_MS;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(
          () => {
            this.#wake = undefined;
            resolve();
          },
          hinted ? Math.min(intervalMs, 5) : intervalMs,
        );
        timer.unref();
        this.#wake = () => {
          this.#wake = undefined;
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /**
   * Sends `signal` (default SIGTERM), then SIGKILL after `timeoutMs`. Idempotent: later calls return
   * the first call's promise. Resolves once the process has exited.
   */
  stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 5000): Promise<EngineExit> {
    if (this.#stopping !== undefined) return this.#stopping;
    this.#stopRequested = true;
    const child = this.#child;
    if (child === undefined) {
      this.#state = 'exited';
      const exit: EngineExit = { code: null, signal: null, requested: true, at: Date.now() };
      this.#exit = exit;
      this.#resolveExited(exit);
      this.#stopping = Promise.resolve(exit);
      return this.#stopping;
    }
    if (this.#exit !== undefined) {
      this.#stopping = Promise.resolve(this.#exit);
      return this.#stopping;
    }
    this.#state = 'stopping';
    this.#stopping = (async () => {
      child.kill(signal);
      const timer = setTimeout(() => {
        this.#log.warn({ pid: child.pid, timeout_ms: timeoutMs }, 'engine ignored the stop signal; SIGKILL');
        child.kill('SIGKILL');
      }, timeoutMs);
      timer.unref();
      const exit = await this.exited;
      clearTimeout(timer);
      return exit;
    })();
    return this.#stopping;
  }
}

function lastLines(text: string, n = 3): string {
  return text.trim().split('\n').slice(-n).join(' | ') || 'no output';
}
