import { readFileSync } from 'node:fs';
import { PoolManagerConfigSchema } from '@llama-orch/contracts';
import { parse } from 'yaml';

/**
 * The heartbeat interval pool-managerd's config asks for (`orchestrator.heartbeat_interval_ms`), as
 * the environment of the orchestratord that `llorch up` starts (`ORCHD_NODE_HEARTBEAT_MS`), unless
 * the caller set it: orchestratord judges a node offline after 3 of its intervals, and with replicas
 * a dead replica's tasks are taken over after 2. A config that cannot be read gives nothing here:
 * pool-managerd itself reports it.
 */
export function nodeHeartbeatEnv(
  configPath: string,
  env: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  if (env.ORCHD_NODE_HEARTBEAT_MS !== undefined) return {};
  try {
    const parsed = PoolManagerConfigSchema.safeParse(parse(readFileSync(configPath, 'utf8')));
    const ms = parsed.success ? parsed.data.orchestrator?.heartbeat_interval_ms : undefined;
    return ms === undefined ? {} : { ORCHD_NODE_HEARTBEAT_MS: String(ms) };
  } catch {
    return {};
  }
}
