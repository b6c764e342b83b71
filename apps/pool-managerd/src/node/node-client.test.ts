import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { findFreePort } from '@llama-orch/engine-provisioner';
import { PoolTable } from '../pools/pool-table.js';
import { BackoffPolicy } from '../supervision/backoff.js';
import { NodeClient } from './node-client.js';
import { FakeOrchestrator } from '../testing/fake-orchestrator.js';

const TOKEN = 'node-client-test-token-0123456789';
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

function client(url: string, registry: PoolTable, intervalMs = 100, memoryBudgetBytes?: number): NodeClient {
  const c = new NodeClient({
    memoryBudgetBytes,
    orchestratorUrl: url,
    nodeId: 'node-a',
    machineId: 'machine-a',
    address: 'http://127.0.0.1:9999',
    version: '0.1.0',
    capabilities: { gpus: [], cpu_cores: 2, ram_total_bytes: 1024 },
    apiToken: TOKEN,
    heartbeatIntervalMs: intervalMs,
    snapshots: () => registry.snapshots(),
    logger: pino({ level: 'silent' }),
    backoff: new BackoffPolicy({ baseMs: 20, maxMs: 100 }),
  });
  cleanups.push(() => c.close());
  return c;
}

describe('NodeClient', () => {
  it('registers, heartbeats the registry state, re-registers after 404 and deregisters on close', async () => {
    const orch = new FakeOrchestrator(TOKEN);
    await orch.listen();
    cleanups.push(() => orch.close());
    const registry = new PoolTable();
    registry.register('p0', {
      managed: true,
      models: ['synthetic:llama'],
      deterministic: false,
      ctx: 512,
      slotsTotal: 2,
    });
    const c = client(orch.url, registry);
    c.start();
    await until(() => orch.heartbeats.length >= 2);
    expect(orch.registrations[0]).toMatchObject({
      node_id: 'node-a',
      address: 'http://127.0.0.1:9999',
      version: '0.1.0',
    });
    expect(orch.registrations[0]?.pools[0]).toMatchObject({
      pool_id: 'p0',
      state: 'provisioning',
      ready: false,
      slots_free: 0,
    });
    expect(orch.heartbeats.every((h) => h.body.pools[0]?.ready === false)).toBe(true);

    // The registry changes; a nudge carries it without waiting for the period.
    registry.transition('p0', 'starting');
    registry.bindEngine('p0', {
      url: 'http://127.0.0.1:1',
      replica_id: 'r0',
      engine_version: 'b1-x',
      slots_total: 2,
      ctx: 512,
      mode: 'managed',
    });
    registry.transition('p0', 'ready');
    c.nudge();
    await until(() => orch.heartbeats.some((h) => h.body.pools[0]?.ready === true));
    const ready = orch.heartbeats.find((h) => h.body.pools[0]?.ready === true);
    expect(ready?.body.pools[0]).toMatchObject({
      state: 'ready',
      slots_total: 2,
      slots_free: 2,
      engine_version: 'b1-x',
      models: ['synthetic:llama'],
    });

    orch.forget();
    await until(() => orch.registrations.length === 2 && c.registrations === 2);
    await until(() => orch.known.has('node-a') && orch.heartbeats.length > 0);

    await c.close();
    expect(orch.deregistrations).toEqual(['node-a']);
    expect(c.state).toBe('closed');
  });

  it('a heartbeat that hangs is given up after an interval and the next one keeps the cadence (3 missed = offline)', async () => {
    const orch = new FakeOrchestrator(TOKEN);
    orch.nextHeartbeatMs = 600;
    await orch.listen();
    cleanups.push(() => orch.close());
    const c = client(orch.url, new PoolTable(), 600);
    c.start();
    await until(() => orch.heartbeats.length >= 1);
    orch.hangHeartbeats = 1;
    await until(() => orch.held === 1);
    const heldAt = Date.now();
    // Given up after 600 ms (the interval), retried 200 ms later: well inside the 1.8 s offline limit.
    // The 5 s request timeout alone would hold the next heartbeat back and the node go offline.
    await until(() => orch.heartbeats.length >= 2, 5000);
    const gap = (orch.heartbeats[1]?.at ?? 0) - heldAt;
    expect(gap).toBeGreaterThanOrEqual(500);
    expect(gap).toBeLessThan(1500);
  });

  it('heartbeats that hang twice in a row (a stopped replica behind a balancer) are retried at once, within 2 intervals', async () => {
    const orch = new FakeOrchestrator(TOKEN);
    orch.nextHeartbeatMs = 1000;
    await orch.listen();
    cleanups.push(() => orch.close());
    const c = client(orch.url, new PoolTable(), 1000);
    c.start();
    await until(() => orch.heartbeats.length >= 1);
    const before = orch.heartbeats.length;
    orch.hangHeartbeats = 2;
    await until(() => orch.held === 1);
    const heldAt = Date.now();
    await until(() => orch.heartbeats.length > before, 5000);
    // Each given up after half an interval and retried 200 ms later: ~1.4 s. Giving up after an
    // interval with one quick retry, then the cadence, would take ~2.2 s, close to the 3 s offline limit.
    expect(orch.held).toBe(2);
    expect((orch.heartbeats.at(-1)?.at ?? 0) - heldAt).toBeLessThan(1900);
  });

  it('retries registration while orchestratord is down, then registers when it comes up', async () => {
    const port = await findFreePort();
    const registry = new PoolTable();
    const c = client(`http://127.0.0.1:${port}`, registry);
    c.start();
    await new Promise((r) => setTimeout(r, 300));
    expect(c.state).toBe('registering');
    const orch = new FakeOrchestrator(TOKEN);
    await orch.listen(port);
    cleanups.push(() => orch.close());
    await until(() => orch.registrations.length === 1 && orch.heartbeats.length >= 1);
    expect(c.state).toBe('online');
  });

  it('does not register with a wrong token (401 is retried, never treated as registered)', async () => {
    const orch = new FakeOrchestrator('another-token-that-does-not-match');
    await orch.listen();
    cleanups.push(() => orch.close());
    const c = client(orch.url, new PoolTable());
    c.start();
    await new Promise((r) => setTimeout(r, 300));
    expect(orch.registrations).toEqual([]);
    expect(c.state).toBe('registering');
  });

  it('with an on-demand budget, registration and heartbeats carry memory: the budget and what the pools in that message take', async () => {
    const orch = new FakeOrchestrator(TOKEN);
    await orch.listen();
    cleanups.push(() => orch.close());
    const registry = new PoolTable({ residentBytes: () => undefined });
    const c = client(orch.url, registry, 100, 8_000_000);
    c.start();
    await until(() => orch.heartbeats.length >= 1);
    // No pool yet (a node with only on_demand): nothing used.
    expect(orch.registrations[0]).toMatchObject({ pools: [], memory: { budget_bytes: 8_000_000, used_bytes: 0 } });
    registry.register('static', { managed: true, models: ['m'], deterministic: false, ctx: 512, slotsTotal: 1 });
    registry.setProjectedBytes('static', 1_000_000);
    registry.register('loaded', {
      managed: true,
      origin: 'catalog',
      models: ['m2'],
      deterministic: false,
      ctx: 512,
      slotsTotal: 1,
    });
    registry.setProjectedBytes('loaded', 2_500_000);
    c.nudge();
    await until(() => orch.heartbeats.some((h) => h.body.pools.length === 2));
    const hb = orch.heartbeats.find((h) => h.body.pools.length === 2)?.body;
    expect(hb?.memory).toEqual({ budget_bytes: 8_000_000, used_bytes: 3_500_000 });
    expect(hb?.pools.map((p) => [p.pool_id, p.origin, p.memory_bytes])).toEqual([
      ['loaded', 'catalog', 2_500_000],
      ['static', undefined, 1_000_000],
    ]);
  });

  it('without a budget (no on_demand), no memory is sent', async () => {
    const orch = new FakeOrchestrator(TOKEN);
    await orch.listen();
    cleanups.push(() => orch.close());
    const c = client(orch.url, new PoolTable());
    c.start();
    await until(() => orch.heartbeats.length >= 1);
    expect('memory' in (orch.registrations[0] ?? {})).toBe(false);
    expect(orch.heartbeats.every((h) => !('memory' in h.body))).toBe(true);
  });
});
