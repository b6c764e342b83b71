import { createInterface } from 'node:readline';
import { execa, type ResultPromise } from 'execa';

/** One JSON log line of a daemon, with the time the harness received it. */
export interface LogRecord {
  source: string;
  received_at: number;
  line: Record<string, unknown>;
}

export interface Daemon {
  name: string;
  pid: number;
  /** Base URL from the daemon's `listening` log line. */
  url: string;
  logs: LogRecord[];
  /** The process; resolves when it exits (never rejects). */
  process: ResultPromise;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Spawns `node <script>` and resolves once it logs `{"msg":"listening","url":…}` (both daemons
 * print one; ports are ephemeral). Every JSON log line is kept for the proof bundle.
 */
export async function startDaemon(
  name: string,
  script: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs: number,
): Promise<Daemon> {
  const child = execa('node', [script, ...args], {
    env: { ...process.env, ...env },
    reject: false,
    stdout: 'pipe',
    stderr: 'pipe',
    cleanup: true,
    forceKillAfterDelay: 10_000,
  });
  const logs: LogRecord[] = [];
  const rawTail: string[] = [];
  let onUrl: (url: string) => void = () => undefined;
  const urlSeen = new Promise<string>((resolve) => {
    onUrl = resolve;
  });
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream! }).on('line', (text) => {
      rawTail.push(text);
      if (rawTail.length > 50) rawTail.shift();
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(text) as Record<string, unknown>;
      } catch {
        return;
      }
      logs.push({ source: name, received_at: Date.now(), line });
      if (line.msg === 'listening' && typeof line.url === 'string') onUrl(line.url);
    });
  }
  let timer: NodeJS.Timeout | undefined;
  const url = await Promise.race([
    urlSeen,
    child.then((r) => {
      throw new Error(`${name} exited (${r.exitCode ?? r.signal}) before listening:\n${rawTail.join('\n')}`);
    }),
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${name} did not listen within ${timeoutMs} ms:\n${rawTail.join('\n')}`)),
        timeoutMs,
      );
    }),
  ]).finally(() => clearTimeout(timer));
  return {
    name,
    pid: child.pid!,
    url,
    logs,
    process: child,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await child;
    },
  };
}

/** Whether a process id is alive (signal 0 probe). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
