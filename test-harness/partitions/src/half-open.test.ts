import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newToken, type CapturedDaemon } from '@llama-orch/chaos';
import { listPools, startNode, startReplica, waitFor, waitPoolsReady } from './lab-daemons.js';
import { openTask } from './lab-task.js';
import { NetLab, iptablesUnavailable, netnsUnavailable, type LabHost } from './net-lab.js';

const HEARTBEAT_MS = 500;
const DEADLINE_MS = 20_000;
/** Bytes from the node after which the dispatch's connection goes half-open: headers and a few dozen token lines. */
const DROP_AFTER_BYTES = 3000;
const unavailable = (await netnsUnavailable()) ?? (await iptablesUnavailable());
if (unavailable !== undefined) process.stdout.write(`[partitions] half-open dispatch: SKIPPED, ${unavailable}\n`);

/**
 * Scenario 4: a dispatch's TCP connection goes half-open — iptables in the node's namespace drops
 * every packet to and from pool-managerd's listen port (no RST either way) — while the node's
 * heartbeats (its own connection to orchestratord's port) go on. The node stays online; only the
 * dispatch's connection is dead.
 */
describe.skipIf(unavailable !== undefined)('a half-open connection on a dispatch', () => {
  const token = newToken('partitions-token');
  let lab: NetLab;
  let workDir: string;
  let host: LabHost;
  let orch: CapturedDaemon;
  let node: CapturedDaemon;
  const daemons: CapturedDaemon[] = [];

  beforeAll(async () => {
    workDir = await mkdtemp(join(tmpdir(), 'llorch-partitions-'));
    lab = await NetLab.create();
    host = await lab.addHost('node-a');
    orch = await startReplica({ name: 'orchestratord', addr: `${lab.hostAddr}:0`, token, heartbeatMs: HEARTBEAT_MS });
    daemons.push(orch);
    node = await startNode({
      id: 'node-a',
      poolId: 'pa',
      host: host.addr,
      orchestratorUrl: orch.url,
      token,
      heartbeatMs: HEARTBEAT_MS,
      slots: 2,
      workDir,
      wrap: lab.wrap(host),
    });
    daemons.push(node);
    await waitPoolsReady(orch.url, token, ['pa']);
  });

  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop('SIGTERM', 5000)));
    await lab?.close();
    if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
  });

  it('is detected while the node heartbeats, and the task ends per the policy', async () => {
    const port = new URL(node.url).port;
    // Mid-stream and deterministic: once a connection to pool-managerd's port has carried
    // DROP_AFTER_BYTES from the node (conntrack's byte count, `connbytes`), every further packet
    // of it is dropped both ways; the first token is long through by then, the end far from sent.
    await lab.inNs(host, ['sysctl', '-q', '-w', 'net.netfilter.nf_conntrack_acct=1']);
    for (const [chain, dir] of [
      ['OUTPUT', '--sport'],
      ['INPUT', '--dport'],
    ] as const) {
      await lab.inNs(host, [
        'iptables',
        '-A',
        chain,
        '-p',
        'tcp',
        dir,
        port,
        '-m',
        'connbytes',
        '--connbytes',
        `${DROP_AFTER_BYTES}:`,
        '--connbytes-dir',
        'reply',
        '--connbytes-mode',
        'bytes',
        '-j',
        'DROP',
      ]);
    }
    const task = openTask(orch.url, token, {
      maxTokens: 200,
      pin: 'pa',
      deadlineMs: DEADLINE_MS,
      timeoutMs: DEADLINE_MS + 10_000,
    });
    await task.firstToken;
    const dropAt = await waitFor(
      'the first dropped packet',
      10_000,
      async () => {
        const out = await lab.inNs(host, ['iptables', '-L', 'OUTPUT', '-v', '-n', '-x']);
        return /^\s*[1-9]\d*\s+\d+\s+DROP/m.test(out) ? Date.now() : undefined;
      },
      20,
    );
    const tokensAtDrop = task.tokensSoFar();
    const end = await task.done;
    const detectedMs = end.endedAt - dropAt;
    const nodeEnded = node.lines.find((l) => l.json?.msg === 'dispatch ended' && l.json.task_id === task.id);
    const nodeState = (await listPools(orch.url, token)).find((p) => p.pool_id === 'pa')?.node_state;

    // after its first token: an error frame (the policy), long before the deadline
    expect(end.tokens).toBeGreaterThan(0);
    expect(end.tokens).toBeLessThan(200);
    expect(end.kind, JSON.stringify(end)).toBe('error');
    expect(end.code).toBe('WORKER_RESET');
    expect(detectedMs).toBeLessThan(5 * HEARTBEAT_MS + 2000);
    // the node never went offline: only the dispatch's connection was dead
    expect(nodeState).toBe('online');
    expect(orch.lines.some((l) => l.json?.msg === 'node offline')).toBe(false);

    process.stdout.write(
      `[partitions] half-open dispatch (iptables connbytes DROP, both ways, after 3 kB from the node): task ended ${end.code} ${(detectedMs / 1000).toFixed(2)} s after the drop ` +
        `(${end.tokens} tokens relayed, ${tokensAtDrop} at the drop; the node finished it ${nodeEnded === undefined ? '(no line)' : `${((nodeEnded.at - dropAt) / 1000).toFixed(2)} s after the drop`}; ` +
        `heartbeat ${HEARTBEAT_MS} ms, deadline ${DEADLINE_MS / 1000} s); node stayed online\n`,
    );
  });
});
