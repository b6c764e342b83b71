import { readPackageVersion, type DaemonArgvSpec } from '@llama-orch/daemon-support/argv';

// Kept free of the daemon's imports (daemon-support's argv entry imports node built-ins only):
// main.ts answers --help/--version before loading the bundle.

export const USAGE = `pool-managerd — llama-orch node daemon: provisions llama.cpp engines and models for its pools,
supervises them and registers the node with orchestratord

usage: pool-managerd --config <file.yaml>
       pool-managerd --help | --version

  -c, --config FILE  the node's YAML config (node id and address, orchestrator URL, pools, supervision);
                     unknown keys are refused, every problem reported at once (fatal log line, exit 1);
                     relative paths in it resolve against its directory
  -h, --help         this help
  -V, --version      print the version

Environment:
  LLORCH_API_TOKEN   bearer token for this node's API and towards orchestratord (config api_token wins);
                     required when node.addr is not loopback
  LLORCH_CACHE_DIR   engine builds and models (wins over config cache_dir; default ~/.cache/llama-orch)
  LOG_LEVEL          pino level (default info)
  HF_TOKEN           Hugging Face token for gated hf: models

Logs: JSON lines on stdout. SIGTERM or SIGINT deregisters the node, stops the engines (SIGTERM, then
SIGKILL after the supervision stop timeout) and exits; a SIGTERM while stopping changes nothing, a
second SIGINT (Ctrl-C) exits at once with status 130.`;

/** The version in the package's package.json (two levels above dist/support/). */
export function packageVersion(): string {
  return readPackageVersion(new URL('../../package.json', import.meta.url));
}

/**
 * pool-managerd's command line: `--help`/`-h`, `--version`/`-V`, and `--config`/`-c <file.yaml>`,
 * which is required (the value `run` carries).
 */
export const ARGV_SPEC: DaemonArgvSpec = Object.freeze({
  name: 'pool-managerd',
  usage: USAGE,
  version: packageVersion,
  required: Object.freeze({ name: 'config', short: 'c', placeholder: '<file.yaml>' }),
});
