import fc from 'fast-check';
import { Agent } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { metricSum } from '@llama-orch/e2e-haiku';
import { ChaosCluster, type ChaosNode } from './chaos-cluster.js';
import {
  anyValue,
  applyMutations,
  contentType,
  deepJson,
  invalidUtf8Body,
  method,
  mutation,
  nastyString,
  oddPath,
  pathId,
  rawBody,
} from './fuzz-arbitraries.js';
import { probe, rawExchange, responseProblems, uploadProbe, type ProbeResponse } from './http-probe.js';
import { writeReport } from './report.js';
import { fillPath, ROUTES, type RouteContext, type RouteSpec } from './routes.js';
import { fuzzHandoffDir } from './handoff-fuzz.js';

// Bounded: about 4,000 loopback requests in all; the seed is printed at the start and again after
// each failed test, so a failing run can be replayed with FUZZ_SEED=<seed>.
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 1_000_000);
const RUNS = Number(process.env.FUZZ_RUNS ?? 60);
const STREAM_CAP = 16 * 1024;

describe('fuzzing both services on every route (real processes, loopback)', () => {
  let cluster: ChaosCluster;
  let node: ChaosNode;
  let ctx: RouteContext;
  let dispatcher: Agent;
  let enginePid: number;
  /** Each daemon's `process_cpu_user_seconds_total` before the fuzzing (undefined: no sample). */
  const cpuBefore = new Map<string, number | undefined>();
  const findings: Array<{ property: string; request: string; status: number; problems: string[]; response?: string }> =
    [];
  let requests = 0;

  const base = (r: RouteSpec): string => (r.service === 'orchestratord' ? cluster.url : node.daemon.url);
  const auth = (): Record<string, string> => cluster.auth;

  /** Sends, records problems, and fails the property on any. */
  async function check(
    property: string,
    baseUrl: string,
    req: { method: string; path: string; headers?: Record<string, string>; body?: string | Buffer },
  ): Promise<ProbeResponse> {
    requests += 1;
    let res: ProbeResponse;
    try {
      res = await probe(baseUrl, req, dispatcher, STREAM_CAP);
    } catch (err) {
      const problem = `request failed: ${(err as Error).message}`;
      findings.push({ property, request: `${req.method} ${req.path.slice(0, 200)}`, status: 0, problems: [problem] });
      throw new Error(problem);
    }
    // pool-managerd has no /v1 door: its every error is an ErrorEnvelope
    const problems = responseProblems(req.method, res, baseUrl === cluster.url ? req.path : undefined);
    if (problems.length > 0) {
      findings.push({
        property,
        request: `${baseUrl === cluster.url ? 'orchestratord' : 'pool-managerd'} ${req.method} ${req.path.slice(0, 200)} body=${String(req.body ?? '').slice(0, 200)}`,
        status: res.status,
        problems,
        response: res.text.slice(0, 300),
      });
      throw new Error(
        `${req.method} ${req.path.slice(0, 120)} → ${res.status}: ${problems.join('; ')} (body ${res.text.slice(0, 300)})`,
      );
    }
    return res;
  }

  /** An id for `{id}` that never names the real pool when the route would act on it. */
  const safeId = (r: RouteSpec, id: string): string =>
    r.mutatesRealPool === true && id === ctx.realPoolId ? `${id}-not` : id;

  beforeAll(async () => {
    cluster = await ChaosCluster.start({ nodes: 1, slots: 2, heartbeatMs: 500, ctx: 1024, prefix: 'llorch-fuzz-' });
    node = cluster.nodes[0] as ChaosNode;
    ctx = { model: 'synthetic:llama', realPoolId: node.poolId, nodeId: node.id };
    dispatcher = new Agent({ connections: 32 });
    const h = (await cluster.handoffs(node)).find((x) => x.pool_id === node.poolId);
    enginePid = h?.pid ?? 0;
    for (const d of [cluster.orchestrator, node.daemon])
      cpuBefore.set(d.name, cpuUserSeconds((await probe(d.url, { method: 'GET', path: '/metrics' })).text));
    process.stdout.write(`[fuzz] seed ${SEED}, ${RUNS} runs per property\n`);
  });

  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => {
      process.stdout.write(`[fuzz] FAILED "${task.name}": replay with FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS}\n`);
    });
  });

  afterAll(async () => {
    if (cluster !== undefined) {
      const path = await writeReport({ seed: SEED, runs: RUNS, requests, findings }, 'fuzz');
      process.stdout.write(`[fuzz] ${requests} requests, ${findings.length} finding(s); report ${path}\n`);
    }
    await dispatcher?.close();
    await cluster?.close();
  });

  const withBody = ROUTES.filter((r) => r.validBody !== undefined);

  it.each(withBody.map((r) => [`${r.service} ${r.method} ${r.path}`, r] as const))(
    'mutated valid bodies: %s',
    async (_name, route) => {
      await fc.assert(
        fc.asyncProperty(mutation, pathId, fc.boolean(), async (muts, id, realId) => {
          const pathIdValue = safeId(
            route,
            realId ? (route.path.includes('/nodes/') ? ctx.nodeId : ctx.realPoolId) : id,
          );
          const body = applyMutations(route.validBody!(ctx), muts);
          await check('mutated', base(route), {
            method: route.method,
            path: fillPath(route.path, pathIdValue),
            headers: { ...auth(), 'content-type': 'application/json' },
            body,
          });
        }),
        { numRuns: RUNS, seed: SEED },
      );
    },
  );

  it('random JSON values, raw bytes and deep nesting as bodies of every route, any content type', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...ROUTES),
        fc.oneof(
          anyValue.map((v) => JSON.stringify(v) ?? 'null'),
          rawBody,
          deepJson,
        ),
        contentType,
        pathId,
        async (route, body, ctype, id) => {
          const headers: Record<string, string> = { ...auth() };
          if (ctype !== undefined) headers['content-type'] = ctype;
          await check('random-body', base(route), {
            method: route.method === 'GET' ? 'POST' : route.method,
            path: fillPath(route.path, safeId(route, id)),
            headers,
            body,
          });
          await check('random-body', base(route), {
            method: route.method,
            path: fillPath(route.path, safeId(route, id)),
            headers,
            body: route.method === 'GET' ? undefined : body,
          });
        },
      ),
      { numRuns: RUNS * 4, seed: SEED },
    );
  });

  it('invalid UTF-8 inside JSON bodies', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...withBody), invalidUtf8Body, async (route, body) => {
        await check('invalid-utf8', base(route), {
          method: route.method,
          path: fillPath(route.path, `${ctx.realPoolId}-zz`),
          headers: { ...auth(), 'content-type': 'application/json' },
          body,
        });
      }),
      { numRuns: RUNS * 2, seed: SEED },
    );
  });

  it('huge strings and arrays in every field, below the body limit', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...withBody),
        nastyString,
        fc.integer({ min: 1, max: 60_000 }),
        async (route, s, n) => {
          const valid = route.validBody!(ctx);
          for (const key of Object.keys(valid)) {
            for (const value of [s, Array.from({ length: n }, () => s.slice(0, 8))]) {
              const body = JSON.stringify({ ...valid, [key]: value });
              if (body.length > 900_000) continue;
              await check('huge-values', base(route), {
                method: route.method,
                path: fillPath(route.path, `${ctx.realPoolId}-zz`),
                headers: { ...auth(), 'content-type': 'application/json' },
                body,
              });
            }
          }
        },
      ),
      { numRuns: Math.max(5, Math.floor(RUNS / 4)), seed: SEED },
    );
  });

  it('bodies over the limit are refused with 413 PAYLOAD_TOO_LARGE on every body route', async () => {
    const limits = { orchestratord: 1_048_576, 'pool-managerd': 4 * 1_048_576 };
    for (const route of withBody) {
      for (const extra of [1, 1024 * 1024]) {
        const over = Buffer.from(
          JSON.stringify({ ...route.validBody!(ctx), prompt: 'y'.repeat(limits[route.service] + extra) }),
        );
        requests += 1;
        const res = await uploadProbe(
          base(route),
          fillPath(route.path, `${ctx.realPoolId}-zz`),
          { ...auth(), 'content-type': 'application/json' },
          over,
        );
        const problems = responseProblems('POST', res);
        if (problems.length > 0)
          findings.push({
            property: 'over-limit',
            request: `${route.service} POST ${route.path}`,
            status: res.status,
            problems,
          });
        expect(problems, `${route.service} ${route.path}`).toEqual([]);
        expect(res.status, `${route.service} ${route.path}`).toBe(413);
        expect(JSON.parse(res.text)).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
      }
    }
  });

  it('odd paths and methods', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<'orchestratord' | 'pool-managerd'>('orchestratord', 'pool-managerd'),
        method,
        oddPath,
        fc.boolean(),
        async (svc, m, path, withAuth) => {
          if (/\/(drain|reload)$/.test(path.split('?')[0] ?? '')) return;
          await check('odd-path', svc === 'orchestratord' ? cluster.url : node.daemon.url, {
            method: m,
            path,
            headers: withAuth ? auth() : {},
          });
        },
      ),
      { numRuns: RUNS * 4, seed: SEED },
    );
  });

  it('heartbeats and registrations with hostile payloads for real and unknown node ids', async () => {
    const snapshot = fc.record(
      {
        pool_id: fc.oneof(fc.constant(node.poolId), fc.string({ maxLength: 70 })),
        state: fc.oneof(fc.constantFrom('ready', 'failed', 'draining'), fc.string({ maxLength: 5 })),
        ready: fc.oneof(fc.boolean(), anyValue),
        draining: fc.boolean(),
        slots_total: fc.oneof(fc.nat(), fc.integer(), fc.double()),
        slots_free: fc.oneof(fc.nat(), fc.integer({ min: -10, max: 10 })),
        models: fc.oneof(fc.array(fc.string({ maxLength: 20 }), { maxLength: 70 }), anyValue),
        engine_version: nastyString,
        ctx: fc.integer(),
        deterministic: fc.boolean(),
        decode_tps: fc.oneof(fc.double(), fc.constant(-1)),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constant(ctx.nodeId), pathId),
        fc.array(snapshot, { maxLength: 300 }),
        anyValue,
        async (id, pools, ts) => {
          await check('heartbeat', cluster.url, {
            method: 'POST',
            path: `/v2/nodes/${encodeURIComponent(id)}/heartbeat`,
            headers: { ...auth(), 'content-type': 'application/json' },
            body: JSON.stringify({ timestamp: typeof ts === 'string' ? ts : new Date().toISOString(), pools }),
          });
        },
      ),
      { numRuns: RUNS * 2, seed: SEED },
    );
  });

  it('raw garbage over TCP neither crashes nor wedges either service', async () => {
    const garbage = [
      'GET / HTTP/1.1\r\n\r\n',
      'BLAH /v2/pools HTTP/1.1\r\nHost: x\r\n\r\n',
      'GET /v2/pools HTTP/9.9\r\nHost: x\r\n\r\n',
      `GET /v2/pools HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(70_000)}\r\n\r\n`,
      'POST /v2/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      'POST /v2/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
      '\u0000\u0001\u0002\r\n\r\n',
      'GET /v2/pools HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab',
    ];
    for (const d of [cluster.orchestrator, node.daemon]) {
      const u = new URL(d.url);
      for (const g of garbage) await rawExchange(u.hostname, Number(u.port), Buffer.from(g, 'latin1'), 1500);
      expect(d.alive(), d.name).toBe(true);
    }
  });

  it('garbage handoff files are rejected while the real pool stays ready', async () => {
    const result = await fuzzHandoffDir({ cluster, node, seed: SEED, runs: RUNS });
    process.stdout.write(`[fuzz] handoff: ${JSON.stringify(result.summary)}\n`);
    expect(result.problems).toEqual([]);
    expect(result.summary.rejectedDelta).toBeGreaterThan(0);
  });

  it('afterwards both daemons are alive, /metrics answers, the real pool is ready on the same engine', async () => {
    for (const d of [cluster.orchestrator, node.daemon]) {
      expect(d.alive(), d.name).toBe(true);
      const m = await probe(d.url, { method: 'GET', path: '/metrics' });
      expect(m.status, `${d.name} /metrics`).toBe(200);
      // thousands of requests later the process has burnt CPU time: the metric is there and moved
      const before = cpuBefore.get(d.name);
      const after = cpuUserSeconds(m.text);
      expect(after, `${d.name}: a process_cpu_user_seconds_total sample`).toBeDefined();
      expect(before, `${d.name}: a process_cpu_user_seconds_total sample before the fuzzing`).toBeDefined();
      expect(after).toBeGreaterThan(before!);
    }
    await cluster.waitPoolsReady(30_000);
    const pools = await cluster.nodePools(node);
    expect(pools.find((p) => p.pool_id === node.poolId)).toMatchObject({ ready: true, state: 'ready' });
    const h = (await cluster.handoffs(node)).find((x) => x.pool_id === node.poolId);
    expect(h?.pid).toBe(enginePid);
    expect(findings).toEqual([]);
  });
});

/** `process_cpu_user_seconds_total` from a scrape; undefined when there is no sample (metricSum alone would read 0). */
function cpuUserSeconds(text: string): number | undefined {
  return /^process_cpu_user_seconds_total(\{[^}]*\})? \S+$/m.test(text)
    ? metricSum(text, 'process_cpu_user_seconds_total')
    : undefined;
}
