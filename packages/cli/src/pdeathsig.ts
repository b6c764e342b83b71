import { execa } from 'execa';

/**
 * The exec-in-place prefix (`setpriv --pdeathsig <signal> --`, util-linux) that makes the kernel
 * send `signal` to a child when its parent dies, even by SIGKILL — the same approach as
 * pool-managerd's for its engines (apps/pool-managerd/src/support/setpriv.ts). Verified by running
 * it once; undefined when setpriv is missing or refuses (not Linux, a seccomp profile).
 */
export async function detectPdeathsigPrefix(
  signal: 'SIGTERM' | 'SIGKILL',
  candidates: readonly string[] = ['/usr/bin/setpriv', '/bin/setpriv', 'setpriv'],
): Promise<string[] | undefined> {
  for (const bin of candidates) {
    try {
      const r = await execa(bin, ['--pdeathsig', signal, '--', 'true'], { reject: false, timeout: 5000 });
      if (r.exitCode === 0) return [bin, '--pdeathsig', signal, '--'];
    } catch {
      // Not there or not executable: try the next candidate.
    }
  }
  return undefined;
}
