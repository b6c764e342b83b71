import type { NodeRegisterRequest } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { snapshot } from '../testing/test-helpers.js';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';

const HB_MS = 100;
const register = (nodeId: string): NodeRegisterRequest => ({
  node_id: nodeId,
  machine_id: 'm',
  address: 'http://127.0.0.1:9',
  pools: [snapshot({ pool_id: `${nodeId}-p`, slots_free: 1 })],
  capabilities: { gpus: [], cpu_cores: 1, ram_total_bytes: 1 },
  version: 'x',
});

describe.each(STORE_KINDS)('node registry and liveness (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('register → online on the first heartbeat (through any replica); unknown nodes must register; deregister', async () => {
    const [a, b] = await h.open(2, { heartbeat_interval_ms: HB_MS });
    const before = Date.now();
    const reg = await a!.nodes.register(register('n2'));
    expect(reg).toMatchObject({ state: 'registering', request: { node_id: 'n2' } });
    expect(reg.lastSeen).toBeGreaterThanOrEqual(before - 50);
    await a!.nodes.register(register('n1'));
    expect(await b!.nodes.heartbeat('n2', [snapshot({ pool_id: 'n2-p', slots_free: 0 })], undefined)).toEqual({
      previous: 'registering',
    });
    expect(await a!.nodes.heartbeat('n2', [snapshot({ pool_id: 'n2-p', slots_free: 0 })], undefined)).toEqual({
      previous: 'online',
    });
    const n2 = await a!.nodes.get('n2');
    expect(n2).toMatchObject({ state: 'online', pools: [{ pool_id: 'n2-p', slots_free: 0 }] });
    expect((await b!.nodes.list()).map((n) => [n.request.node_id, n.state])).toEqual([
      ['n1', 'registering'],
      ['n2', 'online'],
    ]);
    expect(await b!.nodes.heartbeat('ghost', [], undefined)).toBeUndefined();
    expect(await b!.nodes.deregister('n1')).toBe(true);
    expect(await a!.nodes.deregister('n1')).toBe(false);
    expect(await a!.nodes.get('n1')).toBeUndefined();
    // re-registering starts over
    expect((await b!.nodes.register(register('n2'))).state).toBe('registering');
  });

  it('a node silent for 3 intervals goes offline once for the cluster, however many replicas sweep; its next heartbeat brings it back', async () => {
    const clients = await h.open(3, { heartbeat_interval_ms: HB_MS });
    await clients[0]!.nodes.register(register('n1'));
    await clients[1]!.nodes.heartbeat('n1', [], undefined);
    // heartbeats every interval keep it online
    for (let i = 0; i < 6; i += 1) {
      await sleep(HB_MS - 40);
      await clients[i % 3]!.nodes.heartbeat('n1', [], undefined);
      expect((await Promise.all(clients.map((c) => c.nodes.sweep()))).flat()).toEqual([]);
    }
    await sleep(3 * HB_MS + 80);
    const swept = await Promise.all([...clients, ...clients].map((c) => c.nodes.sweep()));
    expect(swept.flat()).toEqual(['n1']);
    expect(await clients[2]!.nodes.get('n1')).toMatchObject({ state: 'offline' });
    expect((await Promise.all(clients.map((c) => c.nodes.sweep()))).flat()).toEqual([]);
    expect(await clients[0]!.nodes.heartbeat('n1', [], undefined)).toEqual({ previous: 'offline' });
    expect(await clients[1]!.nodes.get('n1')).toMatchObject({ state: 'online' });
  });

  it("counts from the node's own timestamp when plausible, else from arrival", async () => {
    const [a] = await h.open(1, { heartbeat_interval_ms: 4000 });
    await a!.nodes.register(register('n1'));
    const sent = Date.now() - 500;
    await a!.nodes.heartbeat('n1', [], sent);
    expect((await a!.nodes.get('n1'))!.lastSeen).toBe(sent);
    const future = Date.now() + 60_000;
    await a!.nodes.heartbeat('n1', [], future);
    const seen = (await a!.nodes.get('n1'))!.lastSeen;
    expect(seen).toBeLessThan(future);
    expect(Math.abs(seen - Date.now())).toBeLessThan(1000);
    await a!.nodes.heartbeat('n1', [], Date.now() - 5000);
    expect(Math.abs((await a!.nodes.get('n1'))!.lastSeen - Date.now())).toBeLessThan(1000);
  });

  it("on-demand memory: the registration's, then each heartbeat that reports one (a heartbeat without keeps the last); a re-registration starts over", async () => {
    const [a, b] = await h.open(2);
    await a!.nodes.register({ ...register('n1'), memory: { budget_bytes: 1000, used_bytes: 0 } });
    expect((await b!.nodes.get('n1'))?.memory).toEqual({ budget_bytes: 1000, used_bytes: 0 });
    await b!.nodes.heartbeat('n1', [], undefined, { budget_bytes: 1000, used_bytes: 600 });
    expect((await a!.nodes.list())[0]?.memory).toEqual({ budget_bytes: 1000, used_bytes: 600 });
    await a!.nodes.heartbeat('n1', [], undefined);
    expect((await b!.nodes.get('n1'))?.memory).toEqual({ budget_bytes: 1000, used_bytes: 600 });
    await b!.nodes.register(register('n2'));
    expect((await a!.nodes.get('n2'))?.memory).toBeUndefined();
    await a!.nodes.register({ ...register('n1'), memory: { budget_bytes: 2000, used_bytes: 0 } });
    expect((await b!.nodes.get('n1'))?.memory).toEqual({ budget_bytes: 2000, used_bytes: 0 });
  });
});
