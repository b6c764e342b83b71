import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';
import { lazyChild } from '../support/lazy-logger.js';

/**
 * Fastify `childLoggerFactory`: a request's logger is a {@link lazyChild} of the app logger
 * (bindings only, no pino child per request). It carries `correlation_id`; a task's logger is a
 * child of its admitting request's.
 */
export function lazyChildLoggerFactory(logger: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions): FastifyBaseLogger {
  return lazyChild(logger as Logger, bindings, opts) as unknown as FastifyBaseLogger;
}
