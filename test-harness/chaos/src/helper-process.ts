import { setTimeout as sleep } from 'node:timers/promises';
import { execa, type ResultPromise } from 'execa';
import type { DaemonExit } from '@llama-orch/daemon-support/daemon-launcher';

/** A helper daemon of the harness (HAProxy, redis-server): its output lines and how it ended. */
export interface HelperProcess {
  readonly child: ResultPromise;
  readonly lines: string[];
  readonly exited: Promise<DaemonExit>;
  /** How it ended; undefined while it runs. */
  exit(): DaemonExit | undefined;
}

/** Spawns `bin` with its output collected line by line (stdin closed, killed with the test process). */
export function spawnHelper(bin: string, args: readonly string[]): HelperProcess {
  const child: ResultPromise = execa(bin, args, {
    reject: false,
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
    buffer: false,
    cleanup: true,
  });
  const lines: string[] = [];
  for (const s of [child.stdout, child.stderr])
    s?.on('data', (d: Buffer) =>
      lines.push(
        ...d
          .toString()
          .split('\n')
          .filter((l) => l !== ''),
      ),
    );
  let exit: DaemonExit | undefined;
  const exited = child.then((r) => (exit = { code: r.exitCode, signal: r.signal }));
  return { child, lines, exited, exit: () => exit };
}

/**
 * Polls `ready` every `everyMs` until it holds; throws with `what` and the last output lines when the
 * helper exits first or `timeoutMs` passes (then the helper is SIGKILLed).
 */
export async function untilHelperReady(
  h: HelperProcess,
  what: string,
  ready: () => Promise<boolean>,
  timeoutMs: number,
  everyMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ready())) {
    const exit = h.exit();
    if (exit !== undefined)
      throw new Error(`${what} exited (${exit.code ?? exit.signal}):\n${h.lines.slice(-20).join('\n')}`);
    if (Date.now() > deadline) {
      h.child.kill('SIGKILL');
      throw new Error(`${what} not ready within ${timeoutMs} ms:\n${h.lines.slice(-20).join('\n')}`);
    }
    await sleep(everyMs);
  }
}
