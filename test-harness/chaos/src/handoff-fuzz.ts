import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { execa } from 'execa';
import { request } from 'undici';
import { metricSum } from '@llama-orch/e2e-haiku';
import type { ChaosCluster, ChaosNode } from './chaos-cluster.js';
import { anyValue, applyMutations, mutation } from './fuzz-arbitraries.js';
import { probe } from './http-probe.js';
import { rssBytes } from './proc.js';

export interface HandoffFuzzOptions {
  cluster: ChaosCluster;
  node: ChaosNode;
  seed: number;
  runs: number;
}

export interface HandoffFuzzResult {
  problems: string[];
  summary: {
    files: number;
    rejectedBefore: number;
    rejectedAfter: number;
    rejectedDelta: number;
    rewrittenPid: number | undefined;
    rssGrowthBytes: number;
  };
}

async function rejectedCount(node: ChaosNode): Promise<number> {
  const m = await probe(node.daemon.url, { method: 'GET', path: '/metrics' });
  return metricSum(m.text, 'llorch_handoff_files_rejected_total');
}

/** A completion straight through pool-managerd: proves the real pool still serves. */
export async function poolServes(cluster: ChaosCluster, node: ChaosNode): Promise<string | undefined> {
  const res = await request(new URL(`/v2/pools/${node.poolId}/completions`, node.daemon.url), {
    method: 'POST',
    headers: { ...cluster.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ task_id: randomUUID(), prompt: 'Once upon a time', max_tokens: 3 }),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) return `completion answered ${res.statusCode}: ${text.slice(0, 200)}`;
  const last = text.trim().split('\n').at(-1) ?? '';
  return /"type":"end"/.test(last) ? undefined : `completion did not end with an end event: ${last.slice(0, 200)}`;
}

/**
 * Drops hostile files into a node's `<runtime_dir>/engines/`: random bytes and JSON, mutated
 * copies of the real handoff (other pool ids, managed with foreign pids, external at a closed
 * port), misnamed files, a directory, a symlink out of the dir, a symlink to /dev/zero, a FIFO,
 * a 20 MiB file, and garbage over the real pool's own handoff (then deleted: the daemon must
 * write it again). The daemon must keep running, count rejections, keep its pool ready and serving.
 */
export async function fuzzHandoffDir(opts: HandoffFuzzOptions): Promise<HandoffFuzzResult> {
  const { cluster, node } = opts;
  const dir = join(node.runtimeDir, 'engines');
  const problems: string[] = [];
  const realFile = join(dir, `${node.poolId}-r0.json`);
  const real = JSON.parse(await readFile(realFile, 'utf8')) as Record<string, unknown>;
  const rejectedBefore = await rejectedCount(node);
  const written: string[] = [];
  const put = async (name: string, content: string | Buffer): Promise<void> => {
    const path = join(dir, name);
    await writeFile(path, content);
    written.push(path);
  };

  const bytes = fc.sample(fc.uint8Array({ maxLength: 4096 }), { numRuns: opts.runs, seed: opts.seed });
  const values = fc.sample(anyValue, { numRuns: opts.runs, seed: opts.seed + 1 });
  const muts = fc.sample(mutation, { numRuns: opts.runs, seed: opts.seed + 2 });
  for (let i = 0; i < opts.runs; i++) {
    await put(`fz${i}-b.json`, Buffer.from(bytes[i] ?? []));
    await put(`fz${i}-v.json`, JSON.stringify(values[i]) ?? 'undefined');
    // A mutated copy of the real handoff under its own (consistent) name, so the schema is what decides.
    const poolId = `fz${i}`;
    const variant = {
      ...real,
      pool_id: poolId,
      replica_id: 'r0',
      ...(i % 3 === 0 ? { provisioning_mode: 'managed', pid: 1 } : {}),
      ...(i % 3 === 1 ? { provisioning_mode: 'external', url: 'http://127.0.0.1:9' } : {}),
    };
    await put(`${poolId}-r0.json`, applyMutations(variant, muts[i] ?? []));
  }
  // A valid-looking managed handoff for a pool this daemon does not run, with a foreign pid.
  await put('ghost-r0.json', JSON.stringify({ ...real, pool_id: 'ghost', pid: process.pid }));
  await put('misnamed.json', JSON.stringify(real));
  await put(`${'n'.repeat(200)}.json`, '{}');
  await put('big.json', Buffer.alloc(20 * 1024 * 1024, '[0,'));
  const specials: string[] = [];
  const special = async (name: string, make: (path: string) => Promise<unknown>): Promise<void> => {
    const path = join(dir, name);
    await make(path);
    specials.push(path);
  };
  await special('dir.json', (p) => mkdir(p));
  await special('outside.json', (p) => symlink('/etc/passwd', p));
  await special('zero.json', (p) => symlink('/dev/zero', p));
  await special('fifo.json', (p) => execa('mkfifo', [p]));
  // Garbage over the real pool's own handoff: rejected, the pool keeps serving.
  await writeFile(realFile, '{"pool_id": "p1", truncated');

  const rssBefore = rssBytes(node.daemon.pid) ?? 0;
  let rssPeak = rssBefore;
  const deadline = Date.now() + 20_000;
  const mustReject = ['outside.json', 'zero.json', 'fifo.json', 'big.json'];
  const rejectedNames = (): Set<string> =>
    new Set(
      node.daemon.lines
        .filter(
          (l) =>
            l.json !== undefined &&
            String(l.json.msg).startsWith('handoff file rejected') &&
            typeof l.json.path === 'string',
        )
        .map((l) => basename(String(l.json?.path))),
    );
  while (Date.now() < deadline && !mustReject.every((n) => rejectedNames().has(n))) {
    await sleep(50);
    rssPeak = Math.max(rssPeak, rssBytes(node.daemon.pid) ?? 0);
  }
  await sleep(500);
  rssPeak = Math.max(rssPeak, rssBytes(node.daemon.pid) ?? 0);
  const seen = rejectedNames();
  for (const name of mustReject) if (!seen.has(name)) problems.push(`${name} was not rejected within 20 s`);
  // A handoff is a few hundred bytes: reading one must never cost the daemon real memory.
  if (rssPeak - rssBefore > 64 * 1024 * 1024)
    problems.push(
      `pool-managerd RSS grew by ${Math.round((rssPeak - rssBefore) / 1048576)} MiB while reading hostile handoff files`,
    );
  if (!node.daemon.alive()) problems.push('pool-managerd died while ingesting hostile handoff files');
  const rejectedAfter = node.daemon.alive() ? await rejectedCount(node).catch(() => -1) : -1;
  if (rejectedAfter <= rejectedBefore)
    problems.push(`llorch_handoff_files_rejected_total did not grow (${rejectedBefore} → ${rejectedAfter})`);
  if (node.daemon.alive()) {
    const pools = await cluster.nodePools(node);
    const mine = pools.find((p) => p.pool_id === node.poolId);
    if (mine?.ready !== true) problems.push(`real pool not ready after hostile handoffs: ${JSON.stringify(mine)}`);
    for (const p of pools)
      if (p.pool_id !== node.poolId && p.ready) problems.push(`hostile handoff made pool ${p.pool_id} ready`);
    const serve = await poolServes(cluster, node);
    if (serve !== undefined) problems.push(serve);
  }

  // Deleting the (garbage) real handoff: the daemon owns it and writes it again for its live engine.
  await rm(realFile, { force: true });
  let rewrittenPid: number | undefined;
  for (let i = 0; i < 50 && rewrittenPid === undefined; i++) {
    await sleep(100);
    try {
      const again = JSON.parse(await readFile(realFile, 'utf8')) as { pid?: number };
      rewrittenPid = again.pid;
    } catch {
      rewrittenPid = undefined;
    }
  }
  if (rewrittenPid !== real.pid)
    problems.push(`real handoff not rewritten for engine ${String(real.pid)} (got ${rewrittenPid})`);

  // Cleanup: unblock a reader stuck on the FIFO (open for write, close), then remove everything.
  const fifo = specials.find((p) => p.endsWith('fifo.json'));
  if (fifo !== undefined) {
    const fh = await open(fifo, constants.O_WRONLY | constants.O_NONBLOCK).catch(() => undefined);
    await fh?.close();
  }
  for (const p of [...written, ...specials]) await rm(p, { recursive: true, force: true });
  return {
    problems,
    summary: {
      files: written.length + specials.length,
      rejectedBefore,
      rejectedAfter,
      rejectedDelta: rejectedAfter - rejectedBefore,
      rewrittenPid,
      rssGrowthBytes: rssPeak - rssBefore,
    },
  };
}
