import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchDaemon, runToExit, type CapturedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { appMain, ChaosCluster, sharedCacheDir, type ChaosNode } from './chaos-cluster.js';
import { probe, responseProblems } from './http-probe.js';
import {
  brokenEngineRepo,
  damagedModels,
  engineBinary,
  fileIdentity,
  isolatedCache,
  notAnEngine,
} from './hostile-setup.js';
import { enginesOf } from './proc.js';
import { writeReport } from './report.js';

interface PoolRow {
  pool_id: string;
  state: string;
  ready: boolean;
  last_error?: string;
  engine_url?: string;
}

/** Expected end state of each hostile pool. */
interface Expectation {
  state: 'failed' | 'ready';
  /** Typed error code in the daemon's `pool provisioning failed` log line. */
  code?: string;
  /** What `last_error` must say. */
  lastError?: RegExp;
}

const FAKE_DIGEST = 'ab'.repeat(32);

async function takenPort(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  return { server, port: typeof addr === 'object' && addr !== null ? addr.port : 0 };
}

/** A loopback port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const { server, port } = await takenPort();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await filesUnder(p)));
    else out.push(p);
  }
  return out;
}

describe('hostile inputs: traversal, symlinks, damaged GGUFs, wrong digests, non-engine handoffs, taken ports, broken builds', () => {
  let cluster: ChaosCluster;
  let ref: ChaosNode;
  let dir: string;
  let cache: string;
  let runtime: string;
  let daemon: CapturedDaemon;
  let taken: { server: Server; port: number };
  let fake: Awaited<ReturnType<typeof notAnEngine>>;
  let identities: Map<string, string>;
  const expectations = new Map<string, Expectation>();
  let final: PoolRow[] = [];

  beforeAll(async () => {
    // A reference cluster on the shared cache: it provides the built llama-server, the synthetic
    // model and an orchestratord the hostile node registers with.
    cluster = await ChaosCluster.start({ nodes: 1, slots: 1, heartbeatMs: 500, ctx: 512, prefix: 'llorch-hostile-' });
    ref = cluster.nodes[0] as ChaosNode;
    const handoff = JSON.parse(await readFile(join(ref.runtimeDir, 'engines', `${ref.poolId}-r0.json`), 'utf8')) as {
      pid: number;
      model: { path: string };
    };
    const binary = await engineBinary(handoff.pid);
    dir = await mkdtemp(join(tmpdir(), 'llorch-hostile-in-'));
    cache = await isolatedCache(dir, sharedCacheDir());
    const models = await damagedModels(handoff.model.path, dir);
    await symlink('/etc/hostname', join(dir, 'link.gguf'));
    // A blob planted in the isolated cache under a digest it does not have, linking out of the cache.
    await mkdir(join(cache, 'models', 'sha256'), { recursive: true });
    await symlink(models.outside, join(cache, 'models', 'sha256', `${FAKE_DIGEST}.gguf`));
    const repo = await brokenEngineRepo(dir);
    taken = await takenPort();
    fake = await notAnEngine();
    identities = new Map();
    for (const p of ['/etc/passwd', '/etc/hostname', models.good, models.truncated, models.corrupt, models.outside])
      identities.set(p, await fileIdentity(p));

    const external = { kind: 'external', binary_path: binary };
    const pool = (id: string, model: string, extra: Record<string, unknown>, expectation: Expectation) => {
      expectations.set(id, expectation);
      return { id, model, gpu: 'off', ctx: 512, threads: 1, source: external, ...extra };
    };
    runtime = join(dir, 'runtime');
    await mkdir(runtime, { recursive: true });
    const configPath = join(dir, 'hostile.yaml');
    await writeFile(
      configPath,
      stringify({
        node: { id: 'hostile-node', addr: '127.0.0.1:0' },
        orchestrator: { url: cluster.url, heartbeat_interval_ms: 500 },
        api_token: cluster.token,
        runtime_dir: runtime,
        cache_dir: cache,
        pools: [
          pool(
            'trav',
            '../../../../../../../../../../etc/passwd',
            {},
            { state: 'failed', code: 'INVALID_GGUF', lastError: /GGUF/i },
          ),
          pool(
            'travhf',
            'hf:org/repo/../../../../etc/passwd.gguf',
            {},
            { state: 'failed', code: 'INVALID_MODEL_REF', lastError: /\.\./ },
          ),
          pool(
            'travsyn',
            'synthetic:llama?vocab=../../../../etc/passwd',
            {},
            { state: 'failed', code: 'INVALID_MODEL_REF', lastError: /vocab|parameter/i },
          ),
          pool(
            'symlink',
            `file:${join(dir, 'link.gguf')}`,
            {},
            { state: 'failed', code: 'INVALID_GGUF', lastError: /GGUF/i },
          ),
          pool(
            'truncated',
            `file:${models.truncated}`,
            {},
            { state: 'failed', code: 'INVALID_GGUF', lastError: /GGUF|truncat|short|end/i },
          ),
          pool('corrupt', `file:${models.corrupt}`, {}, { state: 'failed', code: 'INVALID_GGUF', lastError: /GGUF/i }),
          pool(
            'badsha',
            'synthetic:llama?seed=77',
            { sha256: '0'.repeat(64) },
            { state: 'failed', code: 'DIGEST_MISMATCH', lastError: /sha256|digest/i },
          ),
          pool(
            'badshafile',
            `file:${models.good}`,
            { sha256: 'f'.repeat(64) },
            { state: 'failed', code: 'DIGEST_MISMATCH', lastError: /sha256|digest/i },
          ),
          // Served only from the planted link if the store trusts it; the URL itself refuses connections.
          pool(
            'cachelink',
            `https://127.0.0.1:${await closedPort()}/m.gguf`,
            { sha256: FAKE_DIGEST },
            { state: 'failed', code: 'MODEL_FETCH_FAILED' },
          ),
          pool('porttaken', `file:${models.good}`, { port: taken.port }, { state: 'ready' }),
          {
            ...pool('build', `file:${models.good}`, {}, { state: 'failed', code: 'BUILD_FAILED', lastError: /build/i }),
            source: { kind: 'git', repo, ref: 'main', patches: false },
          },
        ],
      }),
    );
    daemon = await launchDaemon(
      {
        name: 'pool-managerd:hostile',
        output: 'capture',
        script: appMain('pool-managerd'),
        args: ['--config', configPath],
        env: { LOG_LEVEL: 'info', LLORCH_CACHE_DIR: '' },
        cwd: runtime,
      },
      { timeoutMs: 60_000 },
    );
    // Every hostile pool settles (failed or ready); the broken build takes a few seconds.
    const deadline = Date.now() + 180_000;
    for (;;) {
      const res = await probe(daemon.url, { method: 'GET', path: '/v2/pools', headers: cluster.auth });
      final = (JSON.parse(res.text) as { pools: PoolRow[] }).pools;
      const settled = [...expectations.keys()].every((id) =>
        final.some((p) => p.pool_id === id && (p.state === 'failed' || p.state === 'ready')),
      );
      if (settled || Date.now() > deadline) break;
      await sleep(250);
    }
    // pool-managerd's log lines reach its stdout up to 100 ms after the state the API shows
    const logged = (): boolean =>
      [...expectations].every(([id, e]) => e.code === undefined || failureLog(id) !== undefined);
    for (let i = 0; i < 100 && !logged(); i++) await sleep(50);
  });

  afterAll(async () => {
    if (daemon !== undefined) {
      const codes = Object.fromEntries(
        [...expectations.keys()].map((id) => [id, (failureLog(id)?.err as { code?: string } | undefined)?.code]),
      );
      const path = await writeReport(
        {
          pools: final.map((p) => ({
            pool_id: p.pool_id,
            state: p.state,
            ready: p.ready,
            last_error: p.last_error,
            logged_code: codes[p.pool_id],
          })),
        },
        'hostile',
      );
      process.stdout.write(`[hostile] report ${path}\n`);
    }
    await daemon?.stop();
    await cluster?.close();
    taken?.server.close();
    fake?.server.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const failureLog = (poolId: string): Record<string, unknown> | undefined =>
    daemon.lines
      .map((l) => l.json)
      .find(
        (j) => j !== undefined && j.msg === 'pool provisioning failed' && (j.poolId === poolId || j.pool_id === poolId),
      );

  it('each hostile pool ends in its expected state with a clear, typed error', () => {
    const rows: string[] = [];
    for (const [id, e] of expectations) {
      const p = final.find((x) => x.pool_id === id);
      if (p === undefined) {
        rows.push(`${id}: missing`);
        continue;
      }
      if (p.state !== e.state)
        rows.push(`${id}: state ${p.state}, expected ${e.state} (last_error ${p.last_error ?? '-'})`);
      if (e.state === 'failed') {
        if (p.ready) rows.push(`${id}: failed but ready`);
        if (e.lastError !== undefined && !e.lastError.test(p.last_error ?? ''))
          rows.push(`${id}: last_error '${p.last_error ?? ''}' does not match ${String(e.lastError)}`);
        if (e.code !== undefined) {
          const log = failureLog(id);
          const code = (log?.err as { code?: string } | undefined)?.code;
          if (code !== e.code) rows.push(`${id}: logged error code ${code ?? 'none'}, expected ${e.code}`);
        }
      }
    }
    expect(rows).toEqual([]);
  });

  it('no handoff file and no stale ready state for any failed pool, in pool-managerd or orchestratord', async () => {
    const handoffs = await readdir(join(runtime, 'engines'));
    for (const [id, e] of expectations) {
      if (e.state === 'failed') expect(handoffs, id).not.toContain(`${id}-r0.json`);
    }
    await sleep(1200);
    const res = await probe(cluster.url, { method: 'GET', path: '/v2/pools', headers: cluster.auth });
    const pools = (JSON.parse(res.text) as { pools: Array<{ pool_id: string; ready: boolean }> }).pools;
    for (const [id, e] of expectations) {
      const p = pools.find((x) => x.pool_id === id);
      expect(p, `orchestratord knows ${id}`).toBeDefined();
      expect(p?.ready, id).toBe(e.state === 'ready');
    }
  });

  it('a task for a model only a failed pool names is refused with a typed 503, never placed; an unnamed one is 404', async () => {
    const body = {
      task_id: randomUUID(),
      session_id: randomUUID(),
      workload: 'completion',
      model_ref: '../../../../../../../../../../etc/passwd',
      engine: 'llamacpp',
      ctx: 0,
      priority: 'interactive',
      prompt: 'x',
      max_tokens: 2,
      deadline_ms: 10_000,
    };
    const res = await probe(cluster.url, {
      method: 'POST',
      path: '/v2/tasks',
      headers: { ...cluster.auth, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(503);
    expect(responseProblems('POST', res)).toEqual([]);
    expect(JSON.parse(res.text)).toMatchObject({ code: 'MODEL_NOT_AVAILABLE' });
    // a traversal no pool names and the catalog lacks is an unknown model: 404, not retriable
    const unknown = await probe(cluster.url, {
      method: 'POST',
      path: '/v2/tasks',
      headers: { ...cluster.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, task_id: randomUUID(), model_ref: '../../../../etc/passwd' }),
    });
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text)).toMatchObject({ code: 'MODEL_NOT_FOUND', retriable: false });
  });

  it('the isolated cache holds no half-written file: no temp/partial models, no staging dirs, no entry for the failed build, its log kept', async () => {
    const all = await filesUnder(cache);
    const leftovers = all.filter((p) => /\/models\/tmp\/|\.partial|\.tmp-|\.tmp$/.test(p));
    expect(leftovers).toEqual([]);
    const engines = await readdir(join(cache, 'engines'));
    expect(engines.filter((e) => e.startsWith('.tmp-'))).toEqual([]);
    const failedLogs = await readdir(join(cache, 'engines', 'failed'));
    expect(failedLogs.length).toBe(1);
    const fp = (failedLogs[0] as string).replace(/-[^-]+\.log$/, '');
    expect(engines).not.toContain(fp);
    const log = await readFile(join(cache, 'engines', 'failed', failedLogs[0] as string), 'utf8');
    // Half-way: some objects were built before part5.c failed.
    expect(log).toMatch(/part[1-4]\.c\.o|Building C object/);
    expect(log).toMatch(/part5\.c/);
    expect(log).toMatch(/error/i);
    const buildLine = failureLog('build');
    expect(JSON.stringify(buildLine)).toContain(join('engines', 'failed'));
    // Nothing was stored for the digest the planted link claimed, and the wrong-sha synthetic model left no blob.
    const blobs = await readdir(join(cache, 'models', 'sha256'));
    expect(blobs.filter((b) => b !== `${FAKE_DIGEST}.gguf`).every((b) => /^[0-9a-f]{64}\.gguf$/.test(b))).toBe(true);
  });

  it('inputs outside the cache were never written (traversal and symlink targets, damaged models, the planted link target)', async () => {
    for (const [path, identity] of identities) expect(await fileIdentity(path), path).toBe(identity);
  });

  it('a configured engine port that is taken is replaced by a free one; the holder keeps it', () => {
    const p = final.find((x) => x.pool_id === 'porttaken');
    expect(p?.ready).toBe(true);
    expect(Number(new URL(p?.engine_url ?? 'http://x:1').port)).not.toBe(taken.port);
    expect(taken.server.listening).toBe(true);
  });

  it('a reload to a traversal ref is refused and rolled back: same engine, still ready, last_error says so', async () => {
    const before = JSON.parse(await readFile(join(runtime, 'engines', 'porttaken-r0.json'), 'utf8')) as { pid: number };
    const res = await probe(daemon.url, {
      method: 'POST',
      path: '/v2/pools/porttaken/reload',
      headers: { ...cluster.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ new_model_ref: '../../../../../../../../etc/passwd', deadline_ms: 1000 }),
    });
    expect(res.status).toBe(202);
    let row: PoolRow | undefined;
    for (let i = 0; i < 200; i++) {
      await sleep(100);
      const list = JSON.parse(
        (await probe(daemon.url, { method: 'GET', path: '/v2/pools', headers: cluster.auth })).text,
      ) as { pools: PoolRow[] };
      row = list.pools.find((x) => x.pool_id === 'porttaken');
      if (row?.ready === true && /reload/.test(row.last_error ?? '')) break;
    }
    expect(row).toMatchObject({ ready: true, state: 'ready' });
    expect(row?.last_error).toMatch(/reload to .* failed/);
    const after = JSON.parse(await readFile(join(runtime, 'engines', 'porttaken-r0.json'), 'utf8')) as { pid: number };
    expect(after.pid).toBe(before.pid);
  });

  it('a handoff file pointing at something that is not an engine is rejected; no pool becomes ready from it', async () => {
    const handoff = {
      pool_id: 'notengine',
      replica_id: 'r0',
      engine: 'llamacpp',
      engine_version: 'x',
      url: fake.url,
      pid: process.pid,
      model: { id: 'x', path: '/nonexistent' },
      slots_total: 1,
      flags: [],
      provisioning_mode: 'external',
      written_at: new Date().toISOString(),
    };
    await writeFile(join(runtime, 'engines', 'notengine-r0.json'), JSON.stringify(handoff));
    let rejected: Record<string, unknown> | undefined;
    for (let i = 0; i < 300 && rejected === undefined; i++) {
      await sleep(100);
      rejected = daemon.lines
        .map((l) => l.json)
        .find(
          (j) =>
            j !== undefined &&
            String(j.msg).startsWith('handoff file rejected') &&
            String(j.path).endsWith('notengine-r0.json'),
        );
    }
    expect(rejected, 'rejection logged').toBeDefined();
    expect(fake.hits.length).toBeGreaterThan(0);
    const list = JSON.parse(
      (await probe(daemon.url, { method: 'GET', path: '/v2/pools', headers: cluster.auth })).text,
    ) as { pools: PoolRow[] };
    expect(list.pools.find((p) => p.pool_id === 'notengine')?.ready ?? false).toBe(false);
    expect(daemon.alive()).toBe(true);
  });

  it('catalog ids and refs with path traversal stay data: typed answers, no 5xx', async () => {
    const auth = { ...cluster.auth, 'content-type': 'application/json' };
    const reg = await probe(cluster.url, {
      method: 'POST',
      path: '/v2/catalog/models',
      headers: auth,
      body: JSON.stringify({ ref: '../../../../etc/passwd' }),
    });
    expect([201, 400]).toContain(reg.status);
    for (const id of ['..%2F..%2F..%2Fetc%2Fpasswd', '%2e%2e%2f%2e%2e%2fetc%2fshadow', '..', '.%00.']) {
      const del = await probe(cluster.url, {
        method: 'DELETE',
        path: `/v2/catalog/models/${id}`,
        headers: cluster.auth,
      });
      expect(del.status, id).toBeLessThan(500);
      if (del.status >= 400) expect(responseProblems('DELETE', del), id).toEqual([]);
    }
    const avail = await probe(cluster.url, { method: 'GET', path: '/v2/catalog/availability', headers: cluster.auth });
    expect(avail.status).toBe(200);
  });

  it('daemons refuse a listen port that is taken: non-zero exit with the reason', async () => {
    const orch = await runToExit(
      {
        name: 'orchestratord-taken',
        output: 'capture',
        script: appMain('orchestratord'),
        args: [],
        env: { ORCHD_ADDR: `127.0.0.1:${taken.port}`, LLORCH_API_TOKEN: cluster.token },
      },
      { timeoutMs: 20_000 },
    );
    expect(orch.listened).toBe(false);
    expect(orch.exit.code).not.toBe(0);
    expect(orch.lines.map((l) => l.text).join('\n')).toMatch(/EADDRINUSE/);
    const cfg = join(dir, 'taken.yaml');
    await writeFile(
      cfg,
      stringify({
        node: { id: 'taken-node', addr: `127.0.0.1:${taken.port}` },
        api_token: cluster.token,
        runtime_dir: join(dir, 'rt-taken'),
        cache_dir: cache,
        pools: [
          {
            id: 'p0',
            model: `file:${join(dir, 'good.gguf')}`,
            source: { kind: 'external', binary_path: join(dir, 'none') },
          },
        ],
      }),
    );
    const pm = await runToExit(
      {
        output: 'capture',
        name: 'pool-managerd-taken',
        script: appMain('pool-managerd'),
        args: ['--config', cfg],
        env: {},
        cwd: dir,
      },
      { timeoutMs: 20_000 },
    );
    expect(pm.listened).toBe(false);
    expect(pm.exit.code).not.toBe(0);
    expect(pm.lines.map((l) => l.text).join('\n')).toMatch(/EADDRINUSE/);
  });

  it('after the hostile daemon stops, none of its engines survive', async () => {
    const exit = await daemon.stop();
    expect(exit.code).toBe(0);
    for (let i = 0; i < 50 && enginesOf([runtime], `LLORCH_CHAOS_RUN=${runtime}`).length > 0; i++) await sleep(100);
    expect(enginesOf([runtime], `LLORCH_CHAOS_RUN=${runtime}`)).toEqual([]);
    // The reference pool was never disturbed.
    const res = await request(new URL('/v2/pools', ref.daemon.url), { headers: cluster.auth });
    const pools = (await res.body.json()) as { pools: PoolRow[] };
    expect(pools.pools[0]).toMatchObject({ ready: true });
  });
});
