import { describe, expect, it } from 'vitest';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';

const info = (id: string, load = 0) => ({
  replica_id: id,
  address: `http://127.0.0.1:80${id.slice(-1)}`,
  version: '0.1.0',
  up_since: 1_700_000_000_000,
  tasks_relayed: 3,
  load,
});

describe.each(STORE_KINDS)('replica membership (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('every replica sees every live replica; leave removes at once; silence removes after the ttl', async () => {
    const clients = await h.open(3);
    await Promise.all(clients.map((c, i) => c.replicas.announce(info(`r${3 - i}`), 10_000)));
    const seen = await clients[0]!.replicas.list();
    expect(seen.map((r) => r.replica_id)).toEqual(['r1', 'r2', 'r3']);
    expect(seen[0]).toEqual(info('r1'));
    await clients[1]!.replicas.announce(info('r2', 7), 500);
    expect((await clients[2]!.replicas.list()).find((r) => r.replica_id === 'r2')?.load).toBe(7);
    await clients[0]!.replicas.leave('r3');
    expect((await clients[1]!.replicas.list()).map((r) => r.replica_id)).toEqual(['r1', 'r2']);
    await sleep(600);
    expect((await clients[1]!.replicas.list()).map((r) => r.replica_id)).toEqual(['r1']);
  });
});
