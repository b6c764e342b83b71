import { execa } from 'execa';

/** Result of a short-lived helper process (`--version` probes and the like). */
export interface ProbeResult {
  exitCode: number | undefined;
  stdout: string;
  stderr: string;
  /** Spawn failure (ENOENT, EACCES, timeout) when the program did not run to completion. */
  failure?: string;
  /** The program was killed for running past `timeoutMs`. */
  timedOut: boolean;
  /** The signal that ended the program (a crash, or the timeout's kill). */
  signal?: string;
}

/**
 * Runs a program to completion with a kill timeout and an explicit environment, never throwing:
 * probes turn a missing tool into a typed error at the call site.
 */
export async function probe(
  file: string,
  args: readonly string[],
  opts: { env: Readonly<Record<string, string | undefined>>; timeoutMs?: number; signal?: AbortSignal; cwd?: string },
): Promise<ProbeResult> {
  const res = await execa(file, args, {
    env: opts.env,
    extendEnv: false,
    reject: false,
    timeout: opts.timeoutMs ?? 30_000,
    forceKillAfterDelay: 2000,
    cancelSignal: opts.signal,
    stdin: 'ignore',
    cwd: opts.cwd,
    stripFinalNewline: true,
  });
  const failure = res.failed && res.exitCode === undefined ? res.originalMessage || res.shortMessage : undefined;
  return {
    exitCode: res.exitCode,
    stdout: String(res.stdout ?? ''),
    stderr: String(res.stderr ?? ''),
    ...(failure ? { failure } : {}),
    timedOut: res.timedOut,
    ...(res.signal ? { signal: res.signal } : {}),
  };
}
