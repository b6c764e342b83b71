import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { EngineProvisionError } from './errors.js';
import { probe } from './exec.js';

type Env = Readonly<Record<string, string | undefined>>;

/** First line of `<tool> --version`; `TOOL_MISSING` when the tool does not run. */
export async function toolVersion(tool: string, env: Env, signal?: AbortSignal): Promise<string> {
  const res = await probe(tool, ['--version'], { env, timeoutMs: 30_000, signal });
  const line = `${res.stdout}\n${res.stderr}`
    .split('\n')
    .map((l) => l.trim())
    .find(Boolean);
  if (res.exitCode !== 0 || !line) {
    throw new EngineProvisionError(
      'TOOL_MISSING',
      `'${tool}' is required to build llama-server but did not run (${res.failure ?? `exit ${String(res.exitCode)}`}); install it or fix PATH`,
      { tool },
    );
  }
  return line;
}

/** C++ compiler CMake will pick: `$CXX`, else `c++` (what CMake's default lookup finds first). */
export function cxxCompiler(env: Env): string {
  return env.CXX?.trim() || 'c++';
}

/**
 * Identity of this machine's CPU for `GGML_NATIVE=ON` builds: the model name plus a hash of the
 * feature flags, because `-march=native` code depends on the flags and VMs often share one name.
 */
export async function cpuIdentity(): Promise<string> {
  const model = cpus()[0]?.model ?? 'unknown-cpu';
  const info = await readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  const flags = /^(?:flags|Features)\s*:\s*(.*)$/m.exec(info)?.[1] ?? '';
  return flags ? `${model} [flags ${createHash('sha256').update(flags).digest('hex').slice(0, 12)}]` : model;
}
