import { execa } from 'execa';

/**
 * The exec-in-place prefix that makes the kernel SIGKILL an engine when pool-managerd dies, even by
 * SIGKILL (`setpriv --pdeathsig SIGKILL --`, util-linux). Verified by running it once; undefined
 * when missing or not working (the caller warns: orphans are then only swept at the next start).
 */
export async function detectPdeathsigWrapper(
  candidates: readonly string[] = ['/usr/bin/setpriv', '/bin/setpriv', 'setpriv'],
): Promise<string[] | undefined> {
  for (const bin of candidates) {
    try {
      const r = await execa(bin, ['--pdeathsig', 'SIGKILL', '--', 'true'], {
        reject: false,
        timeout: 5000,
        extendEnv: true,
      });
      if (r.exitCode === 0) return [bin, '--pdeathsig', 'SIGKILL', '--'];
    } catch {
      // Try the next candidate.
    }
  }
  return undefined;
}
