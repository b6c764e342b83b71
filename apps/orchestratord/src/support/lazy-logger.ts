import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * A child logger that is only its bindings: each line goes to the root pino logger with the
 * bindings merged in front of the call's own fields, which is what a pino child writes too.
 * Fastify makes one child per request and orchestratord one per task, and most of them never log
 * at an enabled level; a pino `child()` serialises its bindings and builds a logger object up front
 * (see .specs/60-orchestratord.md, Logs). A real pino child is made only for a child with a level
 * of its own (Fastify's route `logLevel`).
 *
 * Lines are merged with `Object.assign` onto a fresh object, never with an object spread followed by
 * more properties, so every line has the same shape for pino's serialiser.
 */
export class LazyChildLogger {
  readonly #root: Logger;
  readonly #bindings: Bindings;
  readonly #childOptions: ChildLoggerOptions | undefined;
  #real: Logger | undefined;

  constructor(root: Logger, bindings: Bindings, childOptions?: ChildLoggerOptions) {
    this.#root = root;
    this.#bindings = bindings;
    this.#childOptions = childOptions;
  }

  isLevelEnabled(level: Level): boolean {
    if (this.#real !== undefined) return this.#real.isLevelEnabled(level);
    const own = this.#childOptions?.level;
    if (own === undefined) return this.#root.isLevelEnabled(level);
    const values = this.#root.levels.values;
    return (values[level] ?? 0) >= (values[own] ?? Number.POSITIVE_INFINITY);
  }

  #log(level: Level, args: unknown[]): void {
    if (!this.isLevelEnabled(level)) return;
    if (this.#childOptions?.level !== undefined) {
      // The root's own level may hide what this child shows: only a pino child can carry it.
      this.#real ??= this.#root.child(this.#bindings, this.#childOptions);
      (this.#real[level] as (...a: unknown[]) => void)(...args);
      return;
    }
    const [first, ...rest] = args;
    const root = this.#root;
    const log = root[level] as (this: Logger, ...a: unknown[]) => void;
    if (first instanceof Error) log.call(root, Object.assign({}, this.#bindings, { err: first }), ...(rest.length > 0 ? rest : [first.message]));
    else if (typeof first === 'object' && first !== null) log.call(root, Object.assign({}, this.#bindings, first), ...rest);
    else log.call(root, Object.assign({}, this.#bindings), first, ...rest);
  }

  // Prototype methods, not per-instance closures: one of these objects exists per request.
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

  set level(level: string) {
    this.#real ??= this.#root.child(this.#bindings, { ...this.#childOptions, level });
    this.#real.level = level;
  }

  child(bindings: Bindings, childOptions?: ChildLoggerOptions): Logger {
    if (this.#real !== undefined) return lazyChild(this.#real, bindings, childOptions);
    const merged = this.#childOptions === undefined && childOptions === undefined ? undefined : Object.assign({}, this.#childOptions, childOptions);
    return lazyChild(this.#root, Object.assign({}, this.#bindings, bindings), merged);
  }
}

/**
 * A child of `root` without a pino child behind it (see {@link LazyChildLogger}). The methods take
 * pino's call forms (`(obj, msg)`, `(msg)`, `(err)`), so the object is a logger wherever one is typed.
 */
export function lazyChild(root: Logger, bindings: Bindings, childOptions?: ChildLoggerOptions): Logger {
  return new LazyChildLogger(root, bindings, childOptions) as unknown as Logger;
}
