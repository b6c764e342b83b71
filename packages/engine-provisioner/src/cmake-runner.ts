import { once } from 'node:events';
import { createInterface } from 'node:readline';
import type { WriteStream } from 'node:fs';
import { execa } from 'execa';

type Env = Readonly<Record<string, string | undefined>>;

/** Outcome of one cmake invocation; output went to the build log. */
export interface CmakeRun {
  exitCode: number | undefined;
  /** Last lines of combined output, for error messages. */
  tail: string[];
  /** Set when cmake could not be started or was killed. */
  failure?: string;
  aborted: boolean;
}

const TAIL_LINES = 25;

/**
 * Runs `cmake <args>` with an explicit environment, appending stdout+stderr to `log` and handing
 * each line to `onLine` (progress parsing). Never throws: the caller maps failures to typed errors
 * that point at the log.
 */
export async function runCmake(
  args: readonly string[],
  opts: { env: Env; log: WriteStream; signal?: AbortSignal; onLine?: (line: string) => void },
): Promise<CmakeRun> {
  opts.log.write(`$ cmake ${args.join(' ')}\n`);
  const child = execa('cmake', args, {
    env: opts.env,
    extendEnv: false,
    reject: false,
    all: true,
    buffer: false,
    stdin: 'ignore',
    cancelSignal: opts.signal,
    // make/ninja children die with cmake's process group only if cmake forwards the signal;
    // SIGKILL after a grace period bounds an abort
    forceKillAfterDelay: 5000,
  });
  const tail: string[] = [];
  let drained: Promise<unknown> = Promise.resolve();
  if (child.all) {
    const rl = createInterface({ input: child.all, crlfDelay: Infinity });
    rl.on('line', (line) => {
      opts.log.write(`${line}\n`);
      tail.push(line);
      if (tail.length > TAIL_LINES) tail.shift();
      opts.onLine?.(line);
    });
    drained = once(rl, 'close');
  }
  const res = await child;
  // readline may still hold the last lines when the process promise settles
  await drained;
  const aborted = Boolean(res.isCanceled);
  const failure = res.failed && res.exitCode === undefined ? res.originalMessage || res.shortMessage : undefined;
  opts.log.write(`# exit ${String(res.exitCode)}${failure ? ` (${failure})` : ''}\n`);
  return { exitCode: res.exitCode, tail, aborted, ...(failure ? { failure } : {}) };
}
