import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * A pino child created on first use. Fastify builds one child logger per request, and pino's
 * `child()` (bindings serialised, level methods rebuilt) was the largest single cost of an
 * admission: most requests never log at an enabled level, and a task's own logger (`child()` of a
 * request logger) folds its bindings into one pino child instead of stacking two.
 */
export class LazyChildLogger {
  readonly #parent: Logger;
  readonly #bindings: Bindings;
  readonly #opts: ChildLoggerOptions | undefined;
  #real: Logger | undefined;

  constructor(parent: Logger, bindings: Bindings, opts?: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#opts = opts;
  }

  #logger(): Logger {
    this.#real ??= this.#parent.child(this.#bindings, this.#opts);
    return this.#real;
  }

  isLevelEnabled(level: Level): boolean {
    if (this.#real !== undefined) return this.#real.isLevelEnabled(level);
    return this.#enabled(level);
  }

  #enabled(level: Level): boolean {
    if (this.#real !== undefined) return true; // pino's own level methods are no-ops when disabled
    const own = this.#opts?.level;
    if (own === undefined) return this.#parent.isLevelEnabled(level);
    const values = this.#parent.levels.values;
    return (values[level] ?? 0) >= (values[own] ?? Number.POSITIVE_INFINITY);
  }

  #log(level: Level, args: unknown[]): void {
    if (this.#enabled(level)) (this.#logger()[level] as (...a: unknown[]) => void)(...args);
  }

  // Prototype methods, not per-instance closures: one of these objects exists per request.
  fatal(...args: unknown[]): void { this.#log('fatal', args); }
  error(...args: unknown[]): void { this.#log('error', args); }
  warn(...args: unknown[]): void { this.#log('warn', args); }
  info(...args: unknown[]): void { this.#log('info', args); }
  debug(...args: unknown[]): void { this.#log('debug', args); }
  trace(...args: unknown[]): void { this.#log('trace', args); }
  silent(): void {}

  get level(): string {
    return this.#real?.level ?? this.#opts?.level ?? this.#parent.level;
  }

  set level(level: string) {
    this.#logger().level = level;
  }

  child(bindings: Bindings, opts?: ChildLoggerOptions): FastifyBaseLogger {
    if (this.#real !== undefined) return lazyChild(this.#real, bindings, opts);
    const merged = this.#opts === undefined && opts === undefined ? undefined : { ...this.#opts, ...opts };
    return lazyChild(this.#parent, { ...this.#bindings, ...bindings }, merged);
  }
}

/**
 * A lazily created child of `parent`. The methods take pino's call forms (`(obj, msg)`,
 * `(msg)`) and pass them through unchanged, so the object is a logger wherever one is typed.
 */
export function lazyChild(parent: Logger, bindings: Bindings, opts?: ChildLoggerOptions): FastifyBaseLogger {
  return new LazyChildLogger(parent, bindings, opts) as unknown as FastifyBaseLogger;
}

/** Fastify `childLoggerFactory`: request loggers are created on first use. */
export function lazyChildLoggerFactory(logger: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions): FastifyBaseLogger {
  return lazyChild(logger as Logger, bindings, opts);
}
