import { createHash } from 'node:crypto';
import {
  AnthropicErrorSchema,
  ErrorEnvelopeSchema,
  OpenAiErrorSchema,
  OrchestratorConfigSchema,
} from '@llama-orch/contracts';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { HB_MS } from '../testing/openai-cluster.js';
import { buildApp, type OrchdApp } from '../app.js';
import { loadCredentials } from './credentials.js';
import { ConfigError } from '../errors.js';
import type { TaskRecord } from '../tasks/task-record.js';
import { createUpstreamDispatchers } from '../upstream/dispatchers.js';
import { captureLogger, openSse, snapshot, taskBody } from '../testing/test-helpers.js';

const NODE = 'node-token-0123456789abcdef';
const ALICE = 'alice-key-0123456789abcdef';
const BOB = 'bob-key-0123456789abcdef-env';
const OPS = 'ops-key-0123456789abcdef';
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
// The documented YAML form.
const KEYS = `keys:
  - name: alice
    key_sha256: ${sha(ALICE)}
  - name: bob            # batch only, 3 requests a minute
    key_env: BOB_KEY
    rate_limit: 3
    max_priority: batch
  - name: ops
    key_sha256: "${sha(OPS).toUpperCase()}"
    role: operator
`;
const bearer = (k: string) => ({ authorization: `Bearer ${k}` });
const register = (nodeId = 'n1') => ({
  node_id: nodeId,
  machine_id: 'm',
  address: 'http://127.0.0.1:9',
  pools: [snapshot({ pool_id: 'p', slots_free: 0 })],
  capabilities: { gpus: [], cpu_cores: 1, ram_total_bytes: 1 },
  version: 'x',
});

describe('client keys and the node token', () => {
  let app: OrchdApp | undefined;
  let closeUpstream: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await app?.close();
    await closeUpstream?.();
  });

  async function make() {
    const config = OrchestratorConfigSchema.parse({
      node_token: NODE,
      keys_file: '/etc/llorch/keys.yaml',
      heartbeat_interval_ms: 1000,
    });
    const credentials = loadCredentials({
      config,
      env: { BOB_KEY: BOB },
      readFile: (p) => (p === '/etc/llorch/keys.yaml' ? KEYS : ''),
    });
    const logs = captureLogger();
    const upstream = createUpstreamDispatchers();
    closeUpstream = () => upstream.close();
    app = await buildApp(
      { logger: logs.logger, upstream: upstream.http1, upstreamH2c: upstream.h2c, credentials },
      config,
    );
    return { app, logs };
  }

  it('node routes take only the node token; client keys take client routes; operator routes an operator key', async () => {
    const { app: a } = await make();
    // the node token registers and heartbeats, and cannot submit tasks or read the cluster
    expect(
      (await a.inject({ method: 'POST', url: '/v2/nodes/register', headers: bearer(NODE), payload: register() }))
        .statusCode,
    ).toBe(200);
    const hb = await a.inject({
      method: 'POST',
      url: '/v2/nodes/n1/heartbeat',
      headers: bearer(NODE),
      payload: { timestamp: new Date().toISOString(), pools: [snapshot({ pool_id: 'p', slots_free: 0 })] },
    });
    expect(hb.statusCode).toBe(200);
    const nodeSubmits = await a.inject({
      method: 'POST',
      url: '/v2/tasks',
      headers: bearer(NODE),
      payload: taskBody({ model_ref: 'm' }),
    });
    expect(nodeSubmits.statusCode).toBe(403);
    expect(ErrorEnvelopeSchema.parse(nodeSubmits.json())).toMatchObject({ code: 'FORBIDDEN', retriable: false });
    expect(
      (
        await a.inject({
          method: 'POST',
          url: '/v1/chat/completions',
          headers: bearer(NODE),
          payload: { model: 'm', messages: [{ role: 'user', content: 'x' }] },
        })
      ).statusCode,
    ).toBe(403);

    // a client key submits, and can neither act as a node nor drain
    const alices = taskBody({ model_ref: 'm' });
    expect(
      (
        await a.inject({
          method: 'POST',
          url: '/v2/tasks',
          headers: bearer(ALICE),
          payload: alices,
        })
      ).statusCode,
    ).toBe(202);
    // its record and the task list: its key and operator keys; the node token is no client
    for (const url of [`/v2/tasks/${String(alices.task_id)}`, '/v2/tasks']) {
      expect((await a.inject({ method: 'GET', url, headers: bearer(ALICE) })).statusCode, url).toBe(200);
      expect((await a.inject({ method: 'GET', url, headers: bearer(OPS) })).statusCode, url).toBe(200);
      expect((await a.inject({ method: 'GET', url, headers: bearer(NODE) })).statusCode, url).toBe(403);
      expect((await a.inject({ method: 'GET', url })).statusCode, url).toBe(401);
    }
    const bobReads = await a.inject({
      method: 'GET',
      url: `/v2/tasks/${String(alices.task_id)}`,
      headers: bearer(BOB),
    });
    expect(bobReads.statusCode).toBe(404);
    expect(ErrorEnvelopeSchema.parse(bobReads.json()).code).toBe('NOT_FOUND');
    for (const [method, url, payload] of [
      ['POST', '/v2/nodes/register', register('evil')],
      ['POST', '/v2/nodes/n1/heartbeat', { timestamp: new Date().toISOString(), pools: [] }],
      ['DELETE', '/v2/nodes/n1', undefined],
      ['POST', '/v2/pools/p/drain', { deadline_ms: 0 }],
      ['POST', '/v2/catalog/models', { ref: 'hf:x/y' }],
      ['GET', '/v2/nodes', undefined],
    ] as const) {
      const res = await a.inject({
        method,
        url,
        headers: bearer(ALICE),
        ...(payload !== undefined ? { payload } : {}),
      });
      expect(res.statusCode, `${method} ${url}`).toBe(403);
    }
    expect((await a.inject({ method: 'GET', url: '/v2/pools', headers: bearer(ALICE) })).statusCode).toBe(200);
    // an operator key reads the node list and reaches drain (the pool's node is unreachable: 503, past auth)
    expect((await a.inject({ method: 'GET', url: '/v2/nodes', headers: bearer(OPS) })).statusCode).toBe(200);
    expect(
      (await a.inject({ method: 'POST', url: '/v2/pools/p/drain', headers: bearer(OPS), payload: { deadline_ms: 0 } }))
        .statusCode,
    ).toBe(503);
    expect(
      (await a.inject({ method: 'POST', url: '/v2/nodes/register', headers: bearer(OPS), payload: register('x') }))
        .statusCode,
    ).toBe(403);
    // anything else: 401
    expect(
      (
        await a.inject({
          method: 'POST',
          url: '/v2/tasks',
          headers: bearer('nobody-0123456789abcdef'),
          payload: taskBody(),
        })
      ).statusCode,
    ).toBe(401);
  });

  it('a key over its rate limit gets 429 + Retry-After: ErrorEnvelope on /v2, OpenAI shape on /v1; other keys unaffected', async () => {
    const { app: a } = await make();
    for (let i = 0; i < 3; i++)
      expect((await a.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer(BOB) })).statusCode).toBe(
        200,
      );
    const v2 = await a.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer(BOB) });
    expect(v2.statusCode).toBe(429);
    expect(Number(v2.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(v2.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(ErrorEnvelopeSchema.parse(v2.json())).toMatchObject({
      code: 'ADMISSION_REJECT',
      policy_label: 'rate_limit',
      retriable: true,
    });
    expect(v2.headers['x-correlation-id']).toBeDefined();
    const v1 = await a.inject({ method: 'GET', url: '/v1/models', headers: bearer(BOB) });
    expect(v1.statusCode).toBe(429);
    expect(v1.headers['retry-after']).toBeDefined();
    expect(OpenAiErrorSchema.parse(v1.json()).error.type).toBe('rate_limit_error');
    for (let i = 0; i < 10; i++)
      expect((await a.inject({ method: 'GET', url: '/v2/meta/capabilities', headers: bearer(ALICE) })).statusCode).toBe(
        200,
      );
    // per-key request counter, key name as the label
    const metrics = (await a.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/llorch_client_requests_total\{key="alice"\} 10/);
    expect(metrics).toMatch(/llorch_client_requests_total\{key="bob"\} 5/);
  });

  it("the engine-route doors count against a key's rate limit; the 429 takes the door's shape", async () => {
    const { app: a } = await make();
    // Refused bodies still count: the limit is checked before the handler.
    for (let i = 0; i < 3; i++)
      expect(
        (await a.inject({ method: 'POST', url: '/v1/embeddings', headers: bearer(BOB), payload: {} })).statusCode,
      ).toBe(400);
    const v1 = await a.inject({ method: 'POST', url: '/v1/embeddings', headers: bearer(BOB), payload: {} });
    expect(v1.statusCode).toBe(429);
    expect(OpenAiErrorSchema.parse(v1.json()).error.type).toBe('rate_limit_error');
    const rerank = await a.inject({ method: 'POST', url: '/rerank', headers: bearer(BOB), payload: {} });
    expect(rerank.statusCode).toBe(429);
    expect(Number(rerank.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(rerank.json()).toEqual({
      error: { code: 429, message: expect.stringContaining('rate limit'), type: 'rate_limit_error' },
    });
    expect((await a.inject({ method: 'POST', url: '/infill', payload: {} })).json()).toMatchObject({
      error: { code: 401, type: 'authentication_error' },
    });
  });

  it('the Anthropic door takes the same keys as x-api-key (or Bearer), with its rate limits and roles, refusing in Anthropic shape', async () => {
    const { app: a } = await make();
    const body = { model: 'nope', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] };
    const msg = (headers: Record<string, string>) =>
      a.inject({ method: 'POST', url: '/v1/messages', headers, payload: body });
    // A known key as x-api-key passes auth (then 404: no pool lists the model), in Anthropic's shape.
    const byApiKey = await msg({ 'x-api-key': ALICE });
    expect(byApiKey.statusCode).toBe(404);
    expect(AnthropicErrorSchema.parse(byApiKey.json()).error.type).toBe('not_found_error');
    expect((await msg(bearer(ALICE))).statusCode).toBe(404);
    const wrong = await msg({ 'x-api-key': 'wrong-key-0123456789' });
    expect(wrong.statusCode).toBe(401);
    expect(AnthropicErrorSchema.parse(wrong.json())).toEqual({
      type: 'error',
      error: { type: 'authentication_error', message: 'invalid bearer token' },
    });
    expect(AnthropicErrorSchema.parse((await msg({})).json()).error.type).toBe('authentication_error');
    // The node token is not a client key (403 permission_error); x-api-key is only the Anthropic door's.
    expect(AnthropicErrorSchema.parse((await msg({ 'x-api-key': NODE })).json()).error.type).toBe('permission_error');
    const chat = await a.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: { 'x-api-key': ALICE },
      payload: {},
    });
    expect(chat.statusCode).toBe(401);
    expect(OpenAiErrorSchema.parse(chat.json()).error.type).toBe('authentication_error');
    const count = await a.inject({
      method: 'POST',
      url: '/v1/messages/count_tokens',
      headers: { 'x-api-key': ALICE },
      payload: { model: 'nope', messages: body.messages },
    });
    expect(count.statusCode).toBe(404);
    for (let i = 0; i < 3; i++) expect((await msg({ 'x-api-key': BOB })).statusCode).toBe(404);
    const limited = await msg({ 'x-api-key': BOB });
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(AnthropicErrorSchema.parse(limited.json()).error.type).toBe('rate_limit_error');
  });

  it('a batch-ceiling key runs Messages and Responses requests in the batch lane too', async () => {
    const { app: a } = await make();
    await a.inject({ method: 'POST', url: '/v2/nodes/register', headers: bearer(NODE), payload: register() });
    // No free slot: both stay queued, and the queue shows their lanes. Not awaited: they answer when the app closes.
    void a.inject({
      method: 'POST',
      url: '/v1/messages',
      headers: { 'x-api-key': BOB },
      payload: { model: 'm', max_tokens: 4, stream: true, messages: [{ role: 'user', content: 'hi' }] },
    });
    void a.inject({
      method: 'POST',
      url: '/v1/responses',
      headers: bearer(ALICE),
      payload: { model: 'm', input: 'hi', stream: true },
    });
    for (let i = 0; i < 100 && a.services.tasks.queueDepth().batch + a.services.tasks.queueDepth().interactive < 2; i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(a.services.tasks.queueDepth()).toEqual({ interactive: 1, batch: 1 });
  });

  it('a batch-ceiling key never gets the interactive lane (/v2 and /v1)', async () => {
    const { app: a } = await make();
    await a.inject({ method: 'POST', url: '/v2/nodes/register', headers: bearer(NODE), payload: register() });
    const body = taskBody({ model_ref: 'm', priority: 'interactive' });
    expect((await a.inject({ method: 'POST', url: '/v2/tasks', headers: bearer(BOB), payload: body })).statusCode).toBe(
      202,
    );
    expect((a.services.tasks.get(body.task_id ?? '') as TaskRecord).request.priority).toBe('batch');
    const alice = taskBody({ model_ref: 'm', priority: 'interactive' });
    expect(
      (await a.inject({ method: 'POST', url: '/v2/tasks', headers: bearer(ALICE), payload: alice })).statusCode,
    ).toBe(202);
    expect((a.services.tasks.get(alice.task_id ?? '') as TaskRecord).request.priority).toBe('interactive');
    expect(a.services.tasks.queueDepth()).toEqual({ interactive: 1, batch: 1 });
  });

  it('never logs a key; logs the key name on a refusal', async () => {
    const { app: a, logs } = await make();
    await a.inject({ method: 'POST', url: '/v2/nodes/register', headers: bearer(ALICE), payload: register() });
    await a.inject({ method: 'POST', url: '/v2/tasks', headers: bearer(NODE), payload: taskBody() });
    await a.inject({ method: 'POST', url: '/v2/tasks', headers: bearer(BOB), payload: taskBody() });
    await a.inject({ method: 'GET', url: '/v2/nodes', headers: bearer('wrong-0123456789abcdef') });
    const all = logs.lines.join('\n');
    for (const secret of [NODE, ALICE, BOB, OPS, sha(ALICE)]) expect(all).not.toContain(secret);
    expect(logs.records().some((r) => r.msg === 'forbidden request' && r.key === 'alice' && r.needs === 'node')).toBe(
      true,
    );
  });

  it('dispatches carry the node token; tokens are counted per key (real sockets, fixture node)', async () => {
    const { app: a } = await make();
    await a.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(a.server.address() as { port: number }).port}`;
    // the fixture node registers with the node token and accepts only dispatches that carry it
    const node = await FixturePoolManager.start({
      nodeId: 'fx',
      pools: [{ pool_id: 'fp', models: ['m'], slots: 1 }],
      token: NODE,
      tokenIntervalMs: 2,
    });
    try {
      await node.startHeartbeats(url, HB_MS);
      const body = taskBody({ model_ref: 'm', max_tokens: 3 });
      const res = await request(`${url}/v2/tasks`, {
        method: 'POST',
        headers: { ...bearer(ALICE), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.statusCode).toBe(202);
      const { streams } = (await res.body.json()) as { streams: { sse: string } };
      const sse = await openSse(streams.sse, bearer(ALICE));
      const end = await sse.waitForFrame((f) => f.event === 'end' || f.event === 'error');
      expect(end).toMatchObject({ event: 'end', data: { tokens_out: 3 } });
      await sse.done;
      const metrics = await (await request(`${url}/metrics`)).body.text();
      expect(metrics).toMatch(/llorch_client_tokens_out_total\{key="alice"\} 3/);
    } finally {
      await node.close();
    }
  });

  it('reports every keys-file problem at once', () => {
    const config = OrchestratorConfigSchema.parse({ keys_file: '/k' });
    const bad = JSON.stringify({
      keys: [
        { name: 'a', key_env: 'UNSET' },
        { name: 'b', key_sha256: 'zz' },
        { name: 'a', key_sha256: sha('x'), key_env: 'Y' },
      ],
    });
    let err: unknown;
    try {
      loadCredentials({ config, env: {}, readFile: () => bad });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const text = (err as ConfigError).problems.join('\n');
    expect(text).toContain('needs LLORCH_NODE_TOKEN');
    expect(text).toContain('key_sha256');
    expect(text).toContain('exactly one of key_sha256 and key_env');
    expect(text).toContain("duplicate key name 'a'");
    expect(() =>
      loadCredentials({ config: OrchestratorConfigSchema.parse({ keys_file: '/missing', node_token: NODE }), env: {} }),
    ).toThrow(ConfigError);
  });
});
