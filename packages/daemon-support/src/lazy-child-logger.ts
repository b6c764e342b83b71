import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';
import type { Log } from './log.js';

/** The levels a line is written at. */
export type LineLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * What a {@link LazyChildLogger} writes through: the part of a pino `Logger` it uses. A pino logger
 * is one, and so is Fastify's app logger (a pino child, typed by Fastify as `FastifyBaseLogger`).
 */
export type LogRoot = Pick<Logger, LineLevel | 'level' | 'levels' | 'isLevelEnabled' | 'child'>;

/**
 * A child logger that is only its bindings: each line goes to the root logger with the bindings
 * merged in front of the call's own fields, which is what a pino child writes too. Fastify makes
 * one child per request, orchestratord one per task, and most of them never log at an enabled
 * level; a pino `child()` serialises its bindings and builds a logger object up front (performance
 * notes: lazy child loggers). A real pino child is made only for a child with a level of its own
 * (Fastify's route `logLevel`), and only when it first writes a line at an enabled level.
 *
 * Lines are merged with `Object.assign` onto a fresh object, never with an object spread followed by
 * more properties, so every line has the same shape for pino's serialiser.
 */
export class LazyChildLogger implements FastifyBaseLogger, Log {
  readonly #root: LogRoot;
  readonly #bindings: Bindings;
  readonly #childOptions: ChildLoggerOptions | undefined;
  /** The pino child, once one is needed (a level of its own that the root may not show). */
  #real: LogRoot | undefined;

  constructor(root: LogRoot, bindings: Bindings, childOptions?: ChildLoggerOptions) {
    this.#root = root;
    this.#bindings = bindings;
    this.#childOptions = childOptions;
  }

  /** Whether a line at `level` is written: the child's own level when it has one, else the root's. */
  isLevelEnabled(level: LineLevel): boolean {
    if (this.#real !== undefined) return this.#real.isLevelEnabled(level);
    const own = this.#childOptions?.level;
    if (own === undefined) return this.#root.isLevelEnabled(level);
    const values = this.#root.levels.values;
    return (values[level] ?? 0) >= (values[own] ?? Number.POSITIVE_INFINITY);
  }

  /** `args` is this call's own array (a rest parameter): it is rewritten in place, not copied. */
  #log(level: LineLevel, args: unknown[]): void {
    if (!this.isLevelEnabled(level)) return;
    if (this.#childOptions?.level !== undefined) {
      // The root's own level may hide what this child shows: only a pino child can carry it.
      this.#real ??= this.#root.child(this.#bindings, this.#childOptions);
      Reflect.apply(this.#real[level], this.#real, args);
      return;
    }
    const first = args[0];
    if (first instanceof Error) {
      args[0] = Object.assign({}, this.#bindings, { err: first });
      // pino's `(err)` form: the error's message is the line's.
      if (args.length === 1) args.push(first.message);
    } else if (typeof first === 'object' && first !== null) {
      args[0] = Object.assign({}, this.#bindings, first);
    } else {
      args.unshift(Object.assign({}, this.#bindings));
    }
    Reflect.apply(this.#root[level], this.#root, args);
  }

  // Prototype methods, not per-instance closures: one of these objects exists per request. Each
  // takes pino's call forms (`(obj, msg, ...)`, `(msg, ...)`, `(err)`).
  fatal(...args: unknown[]): void {
    this.#log('fatal', args);
  }
  error(...args: unknown[]): void {
    this.#log('error', args);
  }
  warn(...args: unknown[]): void {
    this.#log('warn', args);
  }
  info(...args: unknown[]): void {
    this.#log('info', args);
  }
  debug(...args: unknown[]): void {
    this.#log('debug', args);
  }
  trace(...args: unknown[]): void {
    this.#log('trace', args);
  }
  silent(): void {}

  get level(): string {
    return this.#real?.level ?? this.#childOptions?.level ?? this.#root.level;
  }

  /** Setting a level makes the pino child (a level of its own needs one). */
  set level(level: string) {
    this.#real ??= this.#root.child(this.#bindings, { ...this.#childOptions, level });
    this.#real.level = level;
  }

  /** A lazy child of this one: the bindings (and options) of both, still no pino child. */
  child(bindings: Bindings, childOptions?: ChildLoggerOptions): LazyChildLogger {
    if (this.#real !== undefined) return new LazyChildLogger(this.#real, bindings, childOptions);
    const merged =
      this.#childOptions === undefined && childOptions === undefined
        ? undefined
        : Object.assign({}, this.#childOptions, childOptions);
    return new LazyChildLogger(this.#root, Object.assign({}, this.#bindings, bindings), merged);
  }
}
