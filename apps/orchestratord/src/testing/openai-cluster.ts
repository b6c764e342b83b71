import { CLUSTER_HEARTBEAT_MS } from './replica-harness.js';
// Test-only: orchestratord listening on loopback with fixture pool-managerd nodes, and the
// official `openai` client pointed at its /v1 door.
import OpenAI from 'openai';
import { FixturePoolManager, type FixturePoolSpec } from '@llama-orch/fixture-pool-manager';
import type { AppTuning } from '../app.js';
import { makeApp, TOKEN, type ExtraDeps, type TestApp } from './test-helpers.js';

// Offline after 3 missed: 750 ms of silence, far above the event-loop stalls of a busy test machine.
export const HB_MS = CLUSTER_HEARTBEAT_MS;

export interface Cluster {
  t: TestApp;
  url: string;
  nodes: FixturePoolManager[];
  /** The official client; no retries, so a 429/503 reaches the test. */
  client: OpenAI;
  close(): Promise<void>;
}

/** Nodes of a fixture cluster: each a FIXTURE pool-managerd with its pools. */
export type FixtureNodeSpec = { nodeId: string; pools: FixturePoolSpec[]; tokenIntervalMs?: number; h2c?: boolean };

/**
 * orchestratord listening on loopback, with FIXTURE nodes registered and heartbeating every `hbMs`.
 * `app` adds tuning (housekeeping every 20 ms unless set) and deps.
 */
export async function startFixtureCluster(
  nodes: FixtureNodeSpec[],
  over: Record<string, unknown> = {},
  hbMs = HB_MS,
  app: { tuning?: AppTuning; deps?: ExtraDeps } = {},
): Promise<{ t: TestApp; url: string; nodes: FixturePoolManager[] }> {
  const t = await makeApp(
    { heartbeat_interval_ms: hbMs, ...over },
    { tickMs: 20, ...app.tuning },
    undefined,
    undefined,
    app.deps,
  );
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const address = t.app.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
  const fixtures: FixturePoolManager[] = [];
  for (const n of nodes) {
    const f = await FixturePoolManager.start({ ...n, token: TOKEN });
    await f.startHeartbeats(url, hbMs);
    fixtures.push(f);
  }
  return { t, url, nodes: fixtures };
}

export async function startCluster(
  nodes: FixtureNodeSpec[],
  over: Record<string, unknown> = {},
  deps?: ExtraDeps,
): Promise<Cluster> {
  const { t, url, nodes: fixtures } = await startFixtureCluster(nodes, over, HB_MS, { deps });
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: TOKEN, maxRetries: 0, timeout: 20_000 });
  return {
    t,
    url,
    nodes: fixtures,
    client,
    close: async () => {
      await t.close();
      await Promise.all(fixtures.map((f) => f.close()));
    },
  };
}
