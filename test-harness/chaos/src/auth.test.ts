import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchDaemon, runToExit } from '@llama-orch/daemon-support/daemon-launcher';
import { appMain, ChaosCluster, newToken, type ChaosNode } from './chaos-cluster.js';
import { probe, responseProblems } from './http-probe.js';
import { listeningSockets, pidAlive } from './proc.js';
import { fillPath, ROUTES, type RouteSpec } from './routes.js';

/** Authorization headers that must not pass: missing, empty, wrong at every length, another scheme, none. */
function wrongHeaders(token: string): Array<[string, string | undefined]> {
  const sameLength = token.replace(/.$/, (c) => (c === 'a' ? 'b' : 'a'));
  return [
    ['none', undefined],
    ['empty', ''],
    ['wrong, same length', `Bearer ${sameLength}`],
    ['wrong, shorter', `Bearer ${token.slice(0, 16)}`],
    ['wrong, longer', `Bearer ${token}${token}`],
    ['right token as prefix', `Bearer ${token}x`],
    ['other scheme', `Basic ${token}`],
    ['no scheme', token],
    ['different length, random', `Bearer ${newToken('other')}`],
  ];
}
describe('auth matrix, token hygiene and loopback binds', () => {
  let cluster: ChaosCluster;
  let node: ChaosNode;
  let dir: string;

  beforeAll(async () => {
    cluster = await ChaosCluster.start({
      nodes: 1,
      slots: 1,
      heartbeatMs: 500,
      ctx: 512,
      logLevel: 'debug',
      prefix: 'llorch-auth-',
    });
    node = cluster.nodes[0] as ChaosNode;
    dir = await mkdtemp(join(tmpdir(), 'llorch-auth-cfg-'));
  });

  afterAll(async () => {
    await cluster?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const base = (r: RouteSpec): string => (r.service === 'orchestratord' ? cluster.url : node.daemon.url);
  /** Ids that exist where reading is harmless, and never the real pool for drain/reload. */
  const idFor = (r: RouteSpec): string => {
    if (r.path.includes('/nodes/')) return node.id;
    if (r.mutatesRealPool === true) return 'no-such-pool';
    if (r.path.includes('/pools/')) return node.poolId;
    return '00000000-0000-4000-8000-000000000000';
  };
  const send = (r: RouteSpec, authorization: string | undefined) =>
    probe(
      base(r),
      {
        method: r.method,
        path: fillPath(r.path, idFor(r)),
        headers: {
          ...(authorization !== undefined ? { authorization } : {}),
          ...(r.validBody !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(r.validBody !== undefined
          ? {
              body: JSON.stringify(r.validBody({ model: 'synthetic:llama', realPoolId: node.poolId, nodeId: node.id })),
            }
          : {}),
      },
      undefined,
      16 * 1024,
    );

  it('every non-public route of both services answers 401 UNAUTHORIZED (JSON, correlation id) to a missing or wrong token, and not 401 to the right one', async () => {
    const token = cluster.token;
    const variants = wrongHeaders(token);
    const rows: string[] = [];
    for (const r of ROUTES) {
      for (const [label, header] of variants) {
        const res = await send(r, header);
        if (r.public) {
          if (res.status !== 200)
            rows.push(`${r.service} ${r.method} ${r.path} [${label}] public route answered ${res.status}`);
          continue;
        }
        if (res.status !== 401)
          rows.push(`${r.service} ${r.method} ${r.path} [${label}] answered ${res.status}, not 401`);
        else {
          const problems = responseProblems(r.method, res);
          if (problems.length > 0)
            rows.push(`${r.service} ${r.method} ${r.path} [${label}] 401 body: ${problems.join('; ')}`);
          if ((JSON.parse(res.text) as { code?: string }).code !== 'UNAUTHORIZED')
            rows.push(`${r.service} ${r.path} [${label}] code is not UNAUTHORIZED`);
        }
      }
      const ok = await send(r, `Bearer ${token}`);
      if (ok.status === 401 || ok.status >= 500)
        rows.push(`${r.service} ${r.method} ${r.path} [right token] answered ${ok.status}: ${ok.text.slice(0, 200)}`);
      const problems = responseProblems(r.method, ok);
      if (problems.length > 0) rows.push(`${r.service} ${r.method} ${r.path} [right token] ${problems.join('; ')}`);
    }
    expect(rows).toEqual([]);
  });

  it('unknown routes are behind auth too (401 without a token, 404 envelope with it)', async () => {
    for (const d of [cluster.orchestrator, node.daemon]) {
      expect((await probe(d.url, { method: 'GET', path: '/v2/nope' })).status, d.name).toBe(401);
      const with404 = await probe(d.url, { method: 'GET', path: '/v2/nope', headers: cluster.auth });
      expect(with404.status, d.name).toBe(404);
      expect(responseProblems('GET', with404)).toEqual([]);
    }
  });

  it('the token (right or wrong) never appears in any captured log line', async () => {
    // this test's own requests with every wrong header and the right one, whatever ran before it
    const variants = wrongHeaders(cluster.token);
    const route = ROUTES.find((r) => !r.public)!;
    for (const [, header] of [...variants, ['right', `Bearer ${cluster.token}`] as const]) await send(route, header);
    const wrongTokens = variants.flatMap(([, v]) => (v === undefined || v === '' ? [] : [v.replace(/^\w+ /, '')]));
    // let the last request lines flush
    await new Promise((r) => setTimeout(r, 300));
    const lines = cluster.allLines();
    expect(lines.length).toBeGreaterThan(50);
    const leaks = lines.filter(
      (l) => l.text.includes(cluster.token) || wrongTokens.some((w) => w.length >= 16 && l.text.includes(w)),
    );
    expect(leaks.map((l) => `${l.source}: ${l.text.slice(0, 200)}`)).toEqual([]);
  });

  it('orchestratord refuses a non-loopback bind without a token (and starts with one)', async () => {
    const refused = await runToExit(
      {
        name: 'orchestratord-open',
        output: 'capture',
        script: appMain('orchestratord'),
        args: [],
        env: { ORCHD_ADDR: '0.0.0.0:0', LLORCH_API_TOKEN: '' },
      },
      { timeoutMs: 20_000 },
    );
    expect(refused.listened).toBe(false);
    expect(refused.exit.code).not.toBe(0);
    expect(refused.exit.code).not.toBeUndefined();
    expect(refused.lines.map((l) => l.text).join('\n')).toMatch(/LLORCH_API_TOKEN/);
    const token = newToken('bind-check');
    const ok = await launchDaemon(
      {
        name: 'orchestratord-wildcard',
        output: 'capture',
        script: appMain('orchestratord'),
        args: [],
        env: { ORCHD_ADDR: '0.0.0.0:0', LLORCH_API_TOKEN: token },
      },
      { timeoutMs: 20_000 },
    );
    try {
      expect(ok.alive()).toBe(true);
    } finally {
      await ok.stop();
    }
  });

  it('pool-managerd refuses a non-loopback node.addr without api_token (and starts with one)', async () => {
    const config = (withToken: boolean) =>
      stringify({
        node: { id: `open-node-${withToken ? 't' : 'n'}`, addr: '0.0.0.0:0' },
        ...(withToken ? { api_token: newToken('bind-check') } : {}),
        runtime_dir: join(dir, withToken ? 'rt-t' : 'rt-n'),
        cache_dir: join(dir, 'cache'),
        // Nothing to provision: a missing external binary and model fail the pool at once (no build).
        pools: [
          {
            id: 'p0',
            model: `file:${join(dir, 'absent.gguf')}`,
            gpu: 'off',
            source: { kind: 'external', binary_path: join(dir, 'no-llama-server') },
          },
        ],
      });
    await writeFile(join(dir, 'open.yaml'), config(false));
    const refused = await runToExit(
      {
        name: 'pool-managerd-open',
        output: 'capture',
        script: appMain('pool-managerd'),
        args: ['--config', join(dir, 'open.yaml')],
        env: { LLORCH_API_TOKEN: '' },
      },
      { timeoutMs: 20_000 },
    );
    expect(refused.listened).toBe(false);
    expect(refused.exit.code).not.toBe(0);
    expect(refused.exit.code).not.toBeUndefined();
    expect(refused.lines.map((l) => l.text).join('\n')).toMatch(/not loopback.*api_token|api_token.*LLORCH_API_TOKEN/);
    await writeFile(join(dir, 'closed.yaml'), config(true));
    const ok = await launchDaemon(
      {
        name: 'pool-managerd-wildcard',
        output: 'capture',
        script: appMain('pool-managerd'),
        args: ['--config', join(dir, 'closed.yaml')],
        env: { LLORCH_API_TOKEN: '' },
      },
      { timeoutMs: 30_000 },
    );
    try {
      expect(ok.alive()).toBe(true);
    } finally {
      await ok.stop();
    }
  });

  it('engines listen on loopback only: handoff url host is 127.0.0.1 and every listening socket of the engine binds 127.0.0.1', async () => {
    const handoffs = await cluster.handoffs(node);
    expect(handoffs.length).toBeGreaterThan(0);
    for (const h of handoffs) {
      expect(new URL(h.url).hostname).toBe('127.0.0.1');
      expect(pidAlive(h.pid)).toBe(true);
      const socks = listeningSockets(h.pid);
      expect(socks.length, `listening sockets of engine ${h.pid}`).toBeGreaterThan(0);
      for (const s of socks) expect(s, `engine ${h.pid}`).toMatchObject({ family: 'tcp', address: '127.0.0.1' });
      expect(socks.some((s) => s.port === Number(new URL(h.url).port))).toBe(true);
    }
    // The daemons of the cluster were configured for loopback and bind nothing else.
    for (const d of [cluster.orchestrator, node.daemon]) {
      const socks = listeningSockets(d.pid);
      // non-empty, or the loop below would check nothing: at least the daemon's own URL is listed
      expect(
        socks.map((s) => s.port),
        `listening sockets of ${d.name}`,
      ).toContain(Number(new URL(d.url).port));
      for (const s of socks) expect(s, d.name).toMatchObject({ address: '127.0.0.1' });
    }
  });
});
