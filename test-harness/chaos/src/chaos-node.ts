import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { request } from 'undici';
import { stringify } from 'yaml';
import { launchDaemon, type CapturedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { appMain, sharedCacheDir } from './chaos-paths.js';

export interface ChaosNode {
  id: string;
  poolId: string;
  runtimeDir: string;
  configPath: string;
  daemon: CapturedDaemon;
}

export interface ChaosNodeOptions {
  /** Node number: id `chaos-node-<n>`, pool `p<n>`. */
  n: number;
  workDir: string;
  token: string;
  /** Where the node heartbeats: one orchestratord, or the balancer in front of the replicas. */
  orchestratorUrl: string;
  heartbeatMs: number;
  slots: number;
  model?: string;
  cacheDir?: string;
  ctx?: number;
  threads?: number;
  logLevel?: string;
}

/**
 * One pool-managerd with one pool, its runtime dir as cwd and the run's marker in its (and so its
 * engines') environment: that is how the orphan check recognises the run's llama-servers.
 */
export async function startChaosNode(o: ChaosNodeOptions): Promise<ChaosNode> {
  const id = `chaos-node-${o.n}`;
  const poolId = `p${o.n}`;
  const runtimeDir = join(o.workDir, id);
  await mkdir(runtimeDir, { recursive: true });
  const configPath = join(o.workDir, `${id}.yaml`);
  await writeFile(
    configPath,
    stringify({
      node: { id, addr: '127.0.0.1:0' },
      orchestrator: { url: o.orchestratorUrl, heartbeat_interval_ms: o.heartbeatMs },
      api_token: o.token,
      runtime_dir: runtimeDir,
      cache_dir: o.cacheDir ?? sharedCacheDir(),
      pools: [
        {
          id: poolId,
          model: o.model ?? 'synthetic:llama',
          gpu: 'off',
          ctx: o.ctx ?? 2048,
          slots: o.slots,
          threads: o.threads ?? 1,
        },
      ],
    }),
  );
  const daemon = await launchDaemon(
    {
      name: `pool-managerd:${id}`,
      output: 'capture',
      script: appMain('pool-managerd'),
      args: ['--config', configPath],
      env: { LOG_LEVEL: o.logLevel ?? 'info', LLORCH_CHAOS_RUN: o.workDir },
      cwd: runtimeDir,
    },
    { timeoutMs: 60_000 },
  );
  return { id, poolId, runtimeDir, configPath, daemon };
}

/** A handoff file as read from `<runtime_dir>/engines/*.json` (only the fields the suite uses). */
export interface HandoffInfo {
  file: string;
  pool_id: string;
  pid: number;
  url: string;
  provisioning_mode: string;
}

export type NodePool = Record<string, unknown> & {
  pool_id: string;
  ready: boolean;
  state: string;
  slots_total: number;
  slots_free: number;
  active_leases: number;
  engine_url?: string;
};

/** pool-managerd's own view of its pools (`GET /v2/pools` on the node). */
export async function fetchNodePools(node: ChaosNode, auth: Record<string, string>): Promise<NodePool[]> {
  const res = await request(new URL('/v2/pools', node.daemon.url), { headers: auth });
  const body = (await res.body.json()) as { pools: NodePool[] };
  if (res.statusCode !== 200) throw new Error(`${node.id} /v2/pools answered ${res.statusCode}`);
  return body.pools;
}

/** Handoff files currently in a node's `<runtime_dir>/engines`. */
export async function readHandoffs(node: ChaosNode): Promise<HandoffInfo[]> {
  const dir = join(node.runtimeDir, 'engines');
  const out: HandoffInfo[] = [];
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return out;
  }
  for (const name of names) {
    if (!name.endsWith('.json') || name.startsWith('.')) continue;
    try {
      const json = JSON.parse(await readFile(join(dir, name), 'utf8')) as Record<string, unknown>;
      if (typeof json.pid === 'number' && typeof json.url === 'string' && typeof json.pool_id === 'string') {
        out.push({
          file: join(dir, name),
          pool_id: json.pool_id,
          pid: json.pid,
          url: json.url,
          provisioning_mode: String(json.provisioning_mode),
        });
      }
    } catch {
      // mid-rename or removed: the next poll sees it
    }
  }
  return out;
}
