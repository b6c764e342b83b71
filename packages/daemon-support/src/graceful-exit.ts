import closeWithGrace from 'close-with-grace';

/** The logger calls graceful exit makes (pino's shape). */
export interface GracefulExitLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Why the shutdown runs: a signal, a fatal error, or an event loop with nothing left to do. */
export interface ShutdownCause {
  signal?: NodeJS.Signals;
  err?: unknown;
}

export interface GracefulExitOptions {
  /** Longest the shutdown may take; past it the process exits 1, ms. */
  graceMs: number;
  log: GracefulExitLog;
  /** The orderly shutdown: resolves true when every step succeeded (exit 0), else false (exit 1). */
  shutdown: (cause: ShutdownCause) => Promise<boolean>;
  /** Process to install on. @default process */
  proc?: Pick<NodeJS.Process, 'on' | 'off' | 'exit'>;
}

/** The narration (`human`) of the first interrupt's `shutting down` line: how to force. */
export const STOPPING_MESSAGE = 'stopping… (Ctrl-C again to force)';

/** Exit status of a forced stop (a shell's status for a process ended by SIGINT). */
export const FORCED_EXIT_CODE = 130;

const INTERRUPTS = ['SIGINT', 'SIGTERM'] as const;

/**
 * Signal handling of a daemon's entry point (close-with-grace for errors, the grace timer and the
 * exit, with its own policy for the two interrupts):
 * - the first SIGINT or SIGTERM logs `shutting down` (narrated as {@link STOPPING_MESSAGE} for a
 *   SIGINT, `stopping` for a SIGTERM) and runs the orderly shutdown;
 * - a SIGTERM while stopping is logged at info and changes nothing: a terminal's Ctrl-C reaches
 *   the whole process group and a parent such as `llorch up` then sends its own SIGTERM, and
 *   that second delivery of one request must not skip the engines' orderly stop;
 * - a SIGINT while stopping is the operator's second Ctrl-C: a warning, then exit 130 at once.
 * Fatal errors (uncaught exceptions, unhandled rejections) run the same shutdown and exit 1.
 */
export function installGracefulExit(o: GracefulExitOptions): void {
  const proc = o.proc ?? process;
  let cause: ShutdownCause = {};
  const graceful = closeWithGrace(
    {
      delay: o.graceMs,
      skip: [...INTERRUPTS],
      logger: {
        error: (m: unknown) =>
          o.log.error({ detail: m instanceof Error ? m.message : String(m) }, 'shutdown did not finish'),
      },
    },
    async ({ signal, err }) => {
      const why: ShutdownCause =
        err !== undefined ? { err } : signal !== undefined ? { signal: signal as NodeJS.Signals } : cause;
      if (!(await o.shutdown(why))) throw new Error('some shutdown steps failed');
    },
  );
  let stopping = false;
  const onInterrupt = (signal: NodeJS.Signals): void => {
    if (!stopping) {
      stopping = true;
      cause = { signal };
      // only an interrupt typed at a terminal can be typed again
      o.log.info({ signal, human: signal === 'SIGINT' ? STOPPING_MESSAGE : 'stopping' }, 'shutting down');
      void graceful.close();
      return;
    }
    if (signal === 'SIGINT') {
      o.log.warn({ signal }, 'second interrupt: exiting now, without the orderly stop');
      proc.exit(FORCED_EXIT_CODE);
      return;
    }
    o.log.info({ signal }, 'already stopping');
  };
  for (const s of INTERRUPTS) proc.on(s, onInterrupt);
}
