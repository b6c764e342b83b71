/** The part of a Fastify instance {@link listenQuietly} uses. */
export interface Listenable {
  listen(options: ListenOptions): Promise<string>;
  log: object;
}

/** Where to listen (`port` 0: any free port). */
export interface ListenOptions {
  host: string;
  port: number;
}

type LogFn = (...args: unknown[]) => void;

/**
 * `app.listen(options)` with Fastify's own `Server listening at …` line at debug instead of info.
 * Each daemon logs one `listening` line with its facts (URL, auth, start-up) after this, so that
 * one event is one line in the narration. Only the instance logger's `info` is redirected, and
 * only while `listen` runs (no request can be logged by it before the socket is bound).
 */
export async function listenQuietly(app: Listenable, options: ListenOptions): Promise<string> {
  const log = app.log as { info: LogFn; debug: LogFn };
  const own = Object.getOwnPropertyDescriptor(log, 'info');
  const debug = log.debug;
  log.info = (...args: unknown[]) => debug.apply(log, args);
  try {
    return await app.listen(options);
  } finally {
    if (own !== undefined) Object.defineProperty(log, 'info', own);
    else delete (log as { info?: LogFn }).info;
  }
}
