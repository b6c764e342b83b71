import { pino, type Logger } from 'pino';
import { logDestination, type LogDestination } from '@llama-orch/daemon-support';

/** The process's one root logger and the sink it writes to (flushed once at exit). */
export interface RootLogger {
  logger: Logger;
  destination: LogDestination;
}

/**
 * pino JSON to stdout through {@link logDestination}: never blocking the process and never
 * throwing — a reader that went away (EPIPE) or a full pipe drops lines instead of parking the main
 * thread, so a SIGTERM is always handled. Bearer tokens are redacted.
 *
 * A line is written as soon as no write is in flight (`minLength: 0`, pino's own behaviour): lines
 * logged meanwhile go out together with the next write, and whoever tails the log sees each line
 * at once (performance notes: log destination).
 */
export function createRootLogger(level: string): RootLogger {
  const destination = logDestination(1, { minLength: 0 });
  const logger = pino(
    {
      name: 'pool-managerd',
      level,
      redact: ['req.headers.authorization', 'apiToken', 'api_token', '*.api_token'],
    },
    destination,
  );
  return { logger, destination };
}
