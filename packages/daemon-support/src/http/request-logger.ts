import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'pino';
import { LazyChildLogger, type LogRoot } from '../lazy-child-logger.js';

/**
 * Fastify `childLoggerFactory`: a request's logger is a {@link LazyChildLogger} of the app logger
 * (bindings only, no pino child per request). It carries the request's `correlation_id`; whatever
 * the request starts (orchestratord's task, pool-managerd's dispatch) logs through a child of it.
 * A logger that is not a pino logger (none in the daemons) gets its own `child()`.
 */
export function lazyChildLoggerFactory(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  opts: ChildLoggerOptions,
): FastifyBaseLogger {
  return isLogRoot(logger) ? new LazyChildLogger(logger, bindings, ownOptions(opts)) : logger.child(bindings, opts);
}

/** Fastify's app logger is a pino logger (a child of `loggerInstance`), though typed as FastifyBaseLogger. */
function isLogRoot(logger: FastifyBaseLogger): logger is FastifyBaseLogger & LogRoot {
  return 'isLevelEnabled' in logger && 'levels' in logger;
}

/**
 * Fastify passes a fresh options object per request, empty unless the route has a log level or
 * serializers of its own; an empty one is dropped, so neither the request's logger nor each logger
 * below it keeps an object that says nothing (a stream holds both).
 */
export function ownOptions(opts: ChildLoggerOptions): ChildLoggerOptions | undefined {
  for (const key in opts) if ((opts as Record<string, unknown>)[key] !== undefined) return opts;
  return undefined;
}
