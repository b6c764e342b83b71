import { systemClock } from '@llama-orch/daemon-support';
import { describe, expect, it } from 'vitest';
import type { ClusterStore } from '../store/cluster-store.js';
import { captureLogger } from '../testing/test-helpers.js';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';
import { ReplicaDirectory } from './replica-directory.js';
import { defaultReplicaId, replicaIdentity, type ReplicaIdentity } from './replica-identity.js';
import { ReplicaMembership } from './replica-membership.js';

const INTERVAL = 100;

function member(
  store: ClusterStore,
  id: string,
  logger = captureLogger().logger,
  figures = { tasksRelayed: 0, load: 0 },
) {
  const identity: ReplicaIdentity = {
    replicaId: id,
    address: () => `http://10.0.0.1:${id.length}`,
    configuredAddress: 'http://127.0.0.1:0',
  };
  const directory = new ReplicaDirectory({ selfId: id, clock: systemClock, maxAgeMs: 3 * INTERVAL });
  const membership = new ReplicaMembership({
    store: store.replicas,
    identity,
    directory,
    version: '9.9.9',
    figures: () => figures,
    intervalMs: INTERVAL,
    clock: systemClock,
    logger,
  });
  return { membership, directory, figures };
}

describe.each(STORE_KINDS)('replica membership (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('announces at start and every interval with its figures; the directory lists the live replicas; close leaves at once and is idempotent', async () => {
    const [sa, sb] = await h.open(2);
    const a = member(sa!, 'r-a');
    const b = member(sb!, 'r-b', undefined, { tasksRelayed: 4, load: 2 });
    expect(a.membership.state).toBe('idle');
    await a.membership.start();
    await b.membership.start();
    expect(a.membership.state).toBe('running');
    // the store keeps an announcement 3 intervals: two may be missed
    expect(a.membership.ttlMs).toBe(3 * INTERVAL);
    expect(b.directory.live().map((r) => r.replica_id)).toEqual(['r-a', 'r-b']);
    expect(b.directory.live()[1]).toEqual({
      replica_id: 'r-b',
      address: 'http://10.0.0.1:3',
      version: '9.9.9',
      up_since: b.membership.upSince,
      tasks_relayed: 4,
      load: 2,
    });
    // a's next announcement (one interval) refreshes its view with b, and carries its new figures
    a.figures.load = 5;
    await sleep(INTERVAL * 2.5);
    expect(a.directory.live().map((r) => r.replica_id)).toEqual(['r-a', 'r-b']);
    expect(a.directory.addressOf('r-b')).toBe('http://10.0.0.1:3');
    expect(a.directory.leaderId()).toBe('r-a');
    expect(a.directory.isLeader()).toBe(true);
    expect(b.directory.isLeader()).toBe(false);
    expect((await sb!.replicas.list()).find((r) => r.replica_id === 'r-a')?.load).toBe(5);
    // a leaves: gone at once for everyone, b leads after its next announcement
    const closing = a.membership.close();
    expect(a.membership.close()).toBe(closing);
    await closing;
    expect(a.membership.state).toBe('closed');
    expect((await sb!.replicas.list()).map((r) => r.replica_id)).toEqual(['r-b']);
    await sleep(INTERVAL * 1.5);
    expect(b.directory.isLeader()).toBe(true);
    expect(b.directory.addressOf('r-a')).toBeUndefined();
    await b.membership.close();
  });
});

describe('replica membership (redis store down)', () => {
  const h = storeHarness('redis');

  it('logs a failed announcement once per outage, never throws, stops trusting its view, and recovers', async () => {
    const [s] = await h.open(1, { command_timeout_ms: 200 });
    const logs = captureLogger();
    const a = member(s!, 'r-a', logs.logger);
    await a.membership.start();
    expect(a.directory.isLeader()).toBe(true);
    await h.server().kill();
    await sleep(INTERVAL * 5);
    const failed = logs.records().filter((r) => r.msg === 'replica announcement failed; retrying every interval');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ level: 40, replica_id: 'r-a' });
    // a view older than 3 intervals is not trusted: no leader, no addresses
    expect(a.directory.live()).toEqual([]);
    expect(a.directory.isLeader()).toBe(false);
    await h.server().restart();
    const start = Date.now();
    while (!a.directory.isLeader() && Date.now() - start < 5000) await sleep(20);
    expect(a.directory.isLeader()).toBe(true);
    expect(logs.records().filter((r) => r.msg === 'replica announcements restored')).toHaveLength(1);
    await h.server().kill();
    // close while the store is down: bounded by the leave timeout, never rejects
    const t0 = Date.now();
    await a.membership.close();
    expect(Date.now() - t0).toBeLessThan(2000);
    await h.server().restart();
  });
});

describe('replica identity', () => {
  const base = {
    replicaId: undefined,
    advertiseUrl: undefined,
    addr: '127.0.0.1:0',
    hostname: 'gpu-box.lan',
    pid: 4242,
    boundAddress: () => null,
  };

  it('defaults the id to <hostname>-<pid> within the id alphabet', () => {
    expect(replicaIdentity(base).replicaId).toBe('gpu-box.lan-4242');
    expect(replicaIdentity({ ...base, replicaId: 'orchd-a' }).replicaId).toBe('orchd-a');
    expect(defaultReplicaId('höst name', 7)).toBe('h-st-name-7');
    expect(defaultReplicaId('x'.repeat(100), 123456)).toHaveLength(64);
    expect(defaultReplicaId('', 1)).toBe('orchestratord-1');
  });

  it('address: advertise_url first, else the bound address once listening (loopback on a wildcard bind), else none', () => {
    let bound: { address: string; family: string; port: number } | null = null;
    const id = replicaIdentity({ ...base, boundAddress: () => bound });
    // before listening: nothing reachable; announcements show the configured addr
    expect(id.address()).toBeUndefined();
    expect(id.configuredAddress).toBe('http://127.0.0.1:0');
    bound = { address: '127.0.0.1', family: 'IPv4', port: 31337 };
    expect(id.address()).toBe('http://127.0.0.1:31337');
    expect(
      replicaIdentity({
        ...base,
        addr: '0.0.0.0:8080',
        boundAddress: () => ({ address: '0.0.0.0', family: 'IPv4', port: 8080 }),
      }).address(),
    ).toBe('http://127.0.0.1:8080');
    expect(
      replicaIdentity({
        ...base,
        addr: '[::1]:8080',
        boundAddress: () => ({ address: '::1', family: 'IPv6', port: 8080 }),
      }).address(),
    ).toBe('http://[::1]:8080');
    expect(
      replicaIdentity({ ...base, advertiseUrl: 'http://orchd-a.internal:8080/', boundAddress: () => bound }).address(),
    ).toBe('http://orchd-a.internal:8080');
  });
});
