import type { LogFn } from 'pino';

/**
 * The logger surface the daemons' components use: satisfied by a pino Logger and by Fastify's
 * request logger (a pino child carrying the correlation id), so request-scoped children flow into
 * the components unchanged.
 */
export interface Log {
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  debug: LogFn;
  child(bindings: Record<string, unknown>): Log;
}
