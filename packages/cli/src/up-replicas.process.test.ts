// Process level: `llorch up --replicas 3` as a user runs it (the built CLI), with Debian's
// redis-server and HAProxy, three real orchestratord replicas, the real pool-managerd and the
// real llama-server from the shared test cache. The openai client and llorch go through the
// balancer; one replica is stopped (SIGSTOP) and one killed to see the balancer route around
// them; then SIGTERM, and every process llorch started must be gone. The test setup installs
// redis-server and haproxy when missing (as the browser tests install chromium).
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { STOPPING_LINE } from './commands/up.js';
import { freeLoopbackPort } from '@llama-orch/daemon-support';
import { cmdline, descendants, running } from './testing/proc.js';
import {
  CLI_MAIN,
  poolConfig as poolConfigIn,
  replicaId,
  replicasScratch,
  startUp,
  TEST_CACHE,
  until,
} from './testing/up-cluster.js';

const poolConfig = (addr: string): Promise<string> => poolConfigIn(scratch.path, addr);

const MAIN = CLI_MAIN;
const CACHE = TEST_CACHE;
/** Every route but the probes and /metrics needs it, through the balancer too. */
const TOKEN = 'replicas-test-token-0123456789';

const scratch = replicasScratch('up-replicas');

describe('llorch up --replicas 3', () => {
  it(
    'serves the openai client and llorch through HAProxy, routes around a stopped and a killed replica, stops cleanly',
    async () => {
      const t0 = Date.now();
      const up = await startUp(scratch.path, 'replicas', TOKEN, [
        '--replicas',
        '3',
        '--state-dir',
        join(scratch.path, 'state'),
      ]);
      const { llorch, base, text } = up;
      // everything below reads the output so far
      let out = text();
      llorch.all.on('data', () => {
        out = text();
      });
      expect(out, 'llorch up did not report a ready cluster').toContain(
        'llama-orch is up: 3 orchestratord replicas behind haproxy',
      );
      const upMs = Date.now() - t0;
      const tree = descendants(llorch.pid!);
      const names = tree.map(cmdline).join('\n');
      expect(names).toMatch(/redis-server/);
      expect(names).toMatch(/haproxy/);
      expect(names).toMatch(/llama-server/);
      const replicas = new Map(
        tree.flatMap((p) => (cmdline(p).includes('orchestratord') ? [[replicaId(p), p] as const] : [])),
      );
      expect([...replicas.keys()].sort()).toEqual(['r1', 'r2', 'r3']);

      // the summary lists the balancer and each replica's own address
      expect(out).toContain(`  balancer       ${base} (haproxy, health checks on /readyz)`);
      const replicaUrls = [...out.matchAll(/^ {2}replica (r\d)\s+(http:\/\/127\.0\.0\.1:\d+)$/gm)].map((m) => m[2]!);
      expect(replicaUrls).toHaveLength(3);
      for (const url of replicaUrls) {
        const ready = await fetch(`${url}/readyz`);
        expect(ready.status, url).toBe(200);
        const metrics = await fetch(`${url}/metrics`);
        expect(metrics.status, url).toBe(200);
        expect(await metrics.text(), url).toMatch(/^llorch_queue_depth/m);
      }

      const anonymous = await fetch(`${base}/v2/nodes`);
      expect(anonymous.status).toBe(401);
      const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: TOKEN, maxRetries: 0, timeout: 30_000 });
      const chat = async (): Promise<string> => {
        const r = await openai.chat.completions.create({
          model: 'synthetic',
          messages: [{ role: 'user', content: 'Write a haiku' }],
          max_tokens: 8,
          logit_bias: { '2': -100 },
        });
        expect(r.choices[0]?.finish_reason).toBe('length');
        return r.choices[0]?.message.content ?? '';
      };
      expect((await chat()).length).toBeGreaterThan(0);
      const stream = await openai.chat.completions.create({
        model: 'synthetic',
        messages: [{ role: 'user', content: 'Write a haiku' }],
        max_tokens: 8,
        stream: true,
      });
      let streamed = '';
      let chunks = 0;
      for await (const chunk of stream) {
        chunks += 1;
        streamed += chunk.choices[0]?.delta.content ?? '';
      }
      expect(chunks).toBeGreaterThan(2);
      expect(streamed.length).toBeGreaterThan(0);

      // llorch's reads of the cluster, through the balancer
      const status = await execa(process.execPath, [MAIN, 'status', '--json', '--url', base, '--token', TOKEN], {
        reject: false,
      });
      expect(status.exitCode, status.stderr).toBe(0);
      const doc = JSON.parse(status.stdout) as {
        nodes: Array<{ node_id: string; state: string }>;
        pools: Array<{ pool_id: string; ready: boolean }>;
      };
      expect(doc.nodes.map((n) => [n.node_id, n.state])).toEqual([['dev-node', 'online']]);
      expect(doc.pools.map((p) => [p.pool_id, p.ready])).toEqual([['cpu0', true]]);
      const nodes = await execa(process.execPath, [MAIN, 'nodes', '--url', base, '--token', TOKEN], { reject: false });
      expect(nodes.exitCode, nodes.stderr).toBe(0);
      expect(nodes.stdout).toMatch(/dev-node\s+online/);
      const models = await execa(process.execPath, [MAIN, 'models', '--json', '--url', base, '--token', TOKEN], {
        reject: false,
      });
      expect(models.exitCode, models.stderr).toBe(0);
      expect(
        (JSON.parse(models.stdout) as { models: Array<{ aliases?: string[] }> }).models.flatMap((m) => m.aliases ?? []),
      ).toContain('synthetic');

      // /v2 through the balancer: admitted on one replica, its events read on whichever the balancer
      // picks (another replica passes the read to the owner); a few in a row hit several replicas
      for (let i = 0; i < 4; i += 1) {
        const submitted = await execa(
          process.execPath,
          [MAIN, 'submit', 'Write a haiku', '--json', '--max-tokens', '8', '--url', base, '--token', TOKEN],
          { reject: false },
        );
        expect(submitted.exitCode, submitted.stderr).toBe(0);
        expect(JSON.parse(submitted.stdout)).toMatchObject({ canceled: false, tokens_out: 8, pool_id: 'cpu0' });
      }

      // the dashboard is the cluster's whichever replica answers it: every replica, the same recent
      // tasks (each replica writes its ended tasks within 250 ms: read until three answers agree)
      const dashboard = async (): Promise<{ replicas: string[]; tasks: string }> => {
        const res = await fetch(`${base}/v2/dashboard`, { headers: { authorization: `Bearer ${TOKEN}` } });
        expect(res.status).toBe(200);
        const d = (await res.json()) as {
          replicas: Array<{ replica_id: string }>;
          recent_tasks: Array<{ task_id: string }>;
        };
        return {
          replicas: d.replicas.map((r) => r.replica_id),
          tasks: d.recent_tasks
            .map((t) => t.task_id)
            .sort()
            .join(','),
        };
      };
      let dashboards: Array<{ replicas: string[]; tasks: string }> = [];
      for (let i = 0; i < 20; i += 1) {
        dashboards = await Promise.all([dashboard(), dashboard(), dashboard()]);
        if (dashboards.every((d) => d.tasks === dashboards[0]!.tasks)) break;
        await sleep(200);
      }
      for (const d of dashboards) {
        expect(d.replicas).toEqual(['r1', 'r2', 'r3']);
        expect(d.tasks).toBe(dashboards[0]!.tasks);
      }
      // the chats and the four submits above ran on several replicas
      expect(dashboards[0]!.tasks.split(',').length).toBeGreaterThanOrEqual(6);

      // a replica that stops answering: HAProxy's /readyz check takes it out, requests still succeed
      const stopped = replicas.get('r2')!;
      const tStop = Date.now();
      process.kill(stopped, 'SIGSTOP');
      try {
        await until('HAProxy did not take r2 out', () => /Server orchestratord\/r2 is DOWN/.test(out), 10_000, text);
        const downMs = Date.now() - tStop;
        for (let i = 0; i < 4; i += 1) await chat();
        process.kill(stopped, 'SIGCONT');
        await until('HAProxy did not take r2 back', () => /Server orchestratord\/r2 is UP/.test(out), 10_000, text);
        console.log(
          `llorch up --replicas 3: ready after ${upMs} ms; r2 out of the balancer ${downMs} ms after SIGSTOP`,
        );
      } finally {
        process.kill(stopped, 'SIGCONT');
      }

      // a replica killed outright: connections refused are sent to another replica at once; llorch
      // says so in one line and starts it again on its port, ready within a few seconds
      const tKill = Date.now();
      process.kill(replicas.get('r3')!, 'SIGKILL');
      for (let i = 0; i < 4; i += 1) await chat();
      await until(
        'r3 was not restarted',
        () => /\[orchestratord r3\] restarted: ready \d+ ms after it exited/.test(out),
        15_000,
        text,
      );
      console.log(`llorch up --replicas 3: r3 SIGKILLed, ready again ${Date.now() - tKill} ms later`);
      expect(
        out.match(
          /WARN \[orchestratord r3\] exited \(signal SIGKILL\); restarting it on 127\.0\.0\.1:\d+ in 500 ms/g,
        ) ?? [],
        out,
      ).toHaveLength(1);
      const r3Url = replicaUrls[2]!;
      expect((await fetch(`${r3Url}/readyz`)).status).toBe(200);
      expect(descendants(llorch.pid!).filter((p) => replicaId(p) === 'r3')).toHaveLength(1);

      const descendantsAtStop = descendants(llorch.pid!);
      const tTerm = Date.now();
      llorch.kill('SIGTERM');
      const result = await Promise.race([llorch, sleep(60_000).then(() => undefined)]);
      if (result === undefined) for (const p of [llorch.pid!, ...tree]) if (running(p)) process.kill(p, 'SIGKILL');
      expect(result?.exitCode, out).toBe(0);
      console.log(`llorch up --replicas 3: stopped ${Date.now() - tTerm} ms after SIGTERM`);
      expect(out.split('\n').filter((l) => l.trim() === STOPPING_LINE)).toHaveLength(1);
      expect(out).toMatch(/\[pool-managerd\] node dev-node deregistered/);
      // reverse start order: pool-managerd, (haproxy), the replicas still running, redis-server last
      const at = (re: RegExp): number => out.search(re);
      expect(at(/\[pool-managerd\] stopped/), out).toBeGreaterThan(0);
      for (const r of ['r1', 'r2', 'r3']) {
        expect(at(new RegExp(`\\[orchestratord ${r}\\] stopping`)), r).toBeGreaterThan(at(/\[pool-managerd\] stopped/));
        expect(at(/\[redis-server\] .*Received SIGTERM/), r).toBeGreaterThan(
          at(new RegExp(`\\[orchestratord ${r}\\] stopped`)),
        );
      }
      expect(out).not.toMatch(/^llorch: /m);
      const exitedAt = Date.now();
      while (Date.now() - exitedAt < 5000 && tree.some(running)) await sleep(100);
      const left = [...tree, ...descendantsAtStop].filter(running);
      for (const p of left) process.kill(p, 'SIGKILL');
      expect(left.map((p) => `${p}: ${cmdline(p)}`)).toEqual([]);
    },
    6 * 60_000,
  );

  it('without redis-server on PATH: one line saying how to install it, exit 1, nothing started', async () => {
    const empty = await mkdtemp(join(scratch.path, 'path-'));
    const addr = `127.0.0.1:${await freeLoopbackPort()}`;
    const t0 = Date.now();
    const r = await execa(
      process.execPath,
      [
        MAIN,
        'up',
        '--replicas',
        '2',
        '--addr',
        addr,
        '--config',
        await poolConfig(addr),
        '--state-dir',
        join(scratch.path, 'state-missing'),
      ],
      {
        reject: false,
        env: { PATH: empty, LLORCH_CACHE_DIR: CACHE },
        extendEnv: false,
        timeout: 20_000,
      },
    );
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(r.exitCode, r.all).toBe(1);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^llorch: --replicas needs Debian's redis-server .*apt-get install redis-server/),
    ]);
    expect(r.stdout).not.toMatch(/starting/);
  });

  it('a replica that cannot start: one error line naming it, exit 1, Redis stopped too, no process left', async () => {
    const addr = `127.0.0.1:${await freeLoopbackPort()}`;
    const t0 = Date.now();
    // orchestratord refuses this prefix at start-up (config validation): every replica exits 1
    const llorch = execa(
      process.execPath,
      [
        MAIN,
        'up',
        '--replicas',
        '2',
        '--addr',
        addr,
        '--config',
        await poolConfig(addr),
        '--state-dir',
        join(scratch.path, 'state-bad'),
      ],
      {
        reject: false,
        env: { LLORCH_CACHE_DIR: CACHE, ORCHD_REDIS_PREFIX: 'not a prefix' },
        all: true,
        timeout: 30_000,
      },
    );
    /** Every process llorch started, with its command line read while it ran. */
    const seen = new Map<number, string>();
    const watch = setInterval(() => {
      for (const p of descendants(llorch.pid!)) if (!seen.has(p)) seen.set(p, cmdline(p));
    }, 20);
    const r = await llorch;
    clearInterval(watch);
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(r.exitCode, r.all).toBe(1);
    expect(r.stderr.trim().split('\n'), r.all).toEqual([
      expect.stringMatching(/^llorch: orchestratord r[12] exited \(code 1; see its log above\)$/),
    ]);
    expect(r.stdout).toMatch(/ORCHD_REDIS_PREFIX/);
    expect(r.stdout).toMatch(/\[redis-server\] .*Received SIGTERM/);
    expect(r.stdout).not.toMatch(/starting haproxy|starting pool-managerd/);
    // redis-server and the replicas ran (their lines are in the output above); a poll every 20 ms may miss a short-lived one
    expect(seen.size).toBeGreaterThan(0);
    const left = [...seen.keys()].filter(running);
    for (const p of left) process.kill(p, 'SIGKILL');
    expect(left.map((p) => `${p}: ${cmdline(p)}`)).toEqual([]);
  });
});
