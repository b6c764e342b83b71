import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';
import { lazyChild } from '../support/lazy-logger.js';

/**
 * Fastify `childLoggerFactory`: a request's logger is a {@link lazyChild} of the app logger
 * (bindings only, no pino child per request). It carries `correlation_id`; a task's logger is a
 * child of its admitting request's.
 */
export function lazyChildLoggerFactory(logger: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions): FastifyBaseLogger {
  return lazyChild(logger as Logger, bindings, ownOptions(opts)) as unknown as FastifyBaseLogger;
}

/**
 * Fastify passes a fresh options object per request, empty unless the route has a log level or
 * serializers of its own; an empty one is dropped, so neither the request's logger nor each task's
 * logger below it keeps an object that says nothing (a stream holds both).
 */
export function ownOptions(opts: ChildLoggerOptions): ChildLoggerOptions | undefined {
  for (const key in opts) if ((opts as Record<string, unknown>)[key] !== undefined) return opts;
  return undefined;
}
