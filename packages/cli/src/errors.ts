/** A failure to report to the user in one line (no stack trace); exit code 1. */
export class CliError extends Error {
  override readonly name = 'CliError';
}
