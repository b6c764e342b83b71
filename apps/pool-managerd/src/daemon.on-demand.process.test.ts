import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureCpuTestEngine } from '@llama-orch/engine-provisioner';
import { processCmdline } from './support/pid-files.js';
import { buildDist, lineWith, spawnDaemon, type DaemonChild } from './testing/daemon-process.js';
import { FakeOrchestrator } from './testing/fake-orchestrator.js';
import { until } from './testing/harness.js';

// Process level (dist/main.js): a node whose YAML has no pool, only on_demand. It starts, registers
// with no pool and its memory budget, loads a model on request, reports it (and the memory it
// takes) in its heartbeats, unloads it, and stops cleanly.
const TOKEN = 'daemon-on-demand-test-token-0123456789';
const BUDGET = 1024 * 1024 * 1024;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

let dir: string;
beforeAll(async () => {
  await buildDist();
  await ensureCpuTestEngine();
  dir = mkdtempSync(join(tmpdir(), 'pm-on-demand-'));
}, 45 * 60_000);
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('pool-managerd with only on_demand, as a process', () => {
  it('starts with zero pools, registers with its memory, loads and unloads on request, stops on SIGTERM', async () => {
    const orch = new FakeOrchestrator(TOKEN);
    await orch.listen();
    cleanups.push(() => orch.close());
    const runtime = join(dir, 'run');
    const config = join(dir, 'node.yaml');
    writeFileSync(
      config,
      `node:
  id: od-node
  addr: 127.0.0.1:0
runtime_dir: ${runtime}
orchestrator:
  url: ${orch.url}
  heartbeat_interval_ms: 200
on_demand:
  memory_budget_bytes: ${BUDGET}
  threads: 1
`,
    );
    const d: DaemonChild = spawnDaemon(config, { token: TOKEN, stdout: 'read' });
    cleanups.push(() => d.kill());
    const listening = await lineWith(d, 'listening');
    expect(listening).toMatchObject({ pools: [], memory_budget_bytes: BUDGET });
    const url = listening.url as string;
    const auth = { authorization: `Bearer ${TOKEN}` };

    await until(() => orch.registrations.length > 0, 'registered', 30_000);
    expect(orch.registrations[0]).toMatchObject({
      node_id: 'od-node',
      pools: [],
      memory: { budget_bytes: BUDGET, used_bytes: 0 },
    });
    expect((await request(`${url}/readyz`)).statusCode).toBe(200);

    const load = await request(`${url}/v2/pools`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ pool_id: 'loaded', model: 'synthetic:llama', ctx: 256, aliases: ['tiny'] }),
    });
    expect(load.statusCode).toBe(202);
    expect(await load.body.json()).toMatchObject({ pool_id: 'loaded', origin: 'catalog', state: 'provisioning' });
    const ready = await until(
      () => orch.heartbeats.find((h) => h.body.pools[0]?.ready === true)?.body,
      'a heartbeat with the loaded pool ready',
      120_000,
    );
    const pool = ready.pools[0];
    expect(pool).toMatchObject({ pool_id: 'loaded', origin: 'catalog', aliases: ['tiny'], state: 'ready' });
    expect(pool?.memory_bytes).toBeGreaterThan(9_000_000);
    expect(pool?.idle_since).toBeDefined();
    expect(ready.memory).toEqual({ budget_bytes: BUDGET, used_bytes: pool?.memory_bytes });
    const pid = (await lineWith(d, 'engine spawned')).pid as number;
    expect(processCmdline(pid)?.[0]).toMatch(/llama-server$/);

    const del = await request(`${url}/v2/pools/loaded`, { method: 'DELETE', headers: auth });
    expect(del.statusCode).toBe(202);
    await del.body.dump();
    const n = orch.heartbeats.length;
    const empty = await until(
      () => orch.heartbeats.slice(n).find((h) => h.body.pools.length === 0)?.body,
      'a heartbeat without the unloaded pool',
      30_000,
    );
    expect(empty.memory).toEqual({ budget_bytes: BUDGET, used_bytes: 0 });
    await until(() => processCmdline(pid) === undefined, 'engine gone', 10_000);

    d.child.kill('SIGTERM');
    expect((await d.exited).code).toBe(0);
    expect(orch.deregistrations).toEqual(['od-node']);
    expect(existsSync(join(runtime, 'pool-managerd.pid'))).toBe(false);
  });
});
