/** A failure to report to the user in one line (no stack trace); exit code 1. */
export class CliError extends Error {
  override readonly name: string = 'CliError';
  /** Process exit code main.ts uses. */
  readonly exitCode: number = 1;
}

/**
 * The command line itself is wrong (unknown flag or command, missing argument): one line, then
 * `usage` (the command's own help, else the overview), on stderr; exit code 2.
 */
export class UsageError extends CliError {
  override readonly name = 'UsageError';
  override readonly exitCode = 2;
  constructor(
    message: string,
    readonly usage: string,
  ) {
    super(message);
  }
}

/** The user interrupted (Ctrl-C) and what was running was cancelled; exit code 130 (128 + SIGINT). */
export class InterruptedError extends CliError {
  override readonly name = 'InterruptedError';
  override readonly exitCode = 130;
}
