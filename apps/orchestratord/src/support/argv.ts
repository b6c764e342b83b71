import { ORCHESTRATOR_ENV, OrchestratorConfigSchema } from '@llama-orch/contracts';
import { readPackageVersion, type DaemonArgvSpec } from '@llama-orch/daemon-support';

/** `orchestratord --help`: configuration is the environment only; every variable with its default. */
export function usage(): string {
  const defaults = OrchestratorConfigSchema.safeParse({});
  const values: Record<string, unknown> = defaults.success ? defaults.data : {};
  const names = Object.keys(ORCHESTRATOR_ENV);
  const width = Math.max(...names.map((n) => n.length));
  const lines = Object.entries(ORCHESTRATOR_ENV).map(([env, key]) => {
    const d = values[key];
    return `  ${env.padEnd(width)}  ${key}${d === undefined ? '' : ` (default ${String(d)})`}`;
  });
  return `orchestratord — llama-orch control plane: admission, placement and streaming over the nodes' pools

usage: orchestratord [--help] [--version]

Configuration comes from the environment only, read once at start; every problem is reported in
one fatal log line and the process exits 1. Empty variables count as unset. A non-loopback
ORCHD_ADDR requires LLORCH_API_TOKEN. ORCHD_REDIS_URL (redis://host:port/db or rediss://…, Redis
>= 7.0 or Valkey >= 7.2) selects the shared cluster store; unset, all state stays in this process.

${lines.join('\n')}

Logs: JSON lines (pino) on stdout. SIGTERM or SIGINT: not ready at once, the tasks admitted
here finish (ORCHD_DRAIN_GRACE_MS), then it closes within ~12 s; a second SIGINT exits at once.`;
}

/** The version in the package's package.json (two levels above dist/support/). */
export function packageVersion(): string {
  return readPackageVersion(new URL('../../package.json', import.meta.url));
}

/** orchestratord's command line: `--help`/`-h` and `--version`/`-V` only (configuration is the environment). */
export function argvSpec(): DaemonArgvSpec {
  return { name: 'orchestratord', usage: usage(), version: packageVersion };
}
