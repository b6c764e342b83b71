import { randomUUID } from 'node:crypto';
import { Agent, H2CClient, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDispatchApp } from '../app.js';
import { startHarness, until, waitReady, type Harness } from '../testing/harness.js';
import { correlationIdFor } from '@llama-orch/daemon-support';

describe('correlationIdFor', () => {
  it('takes a well-formed X-Correlation-Id and replaces anything else with a UUID', () => {
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    expect(correlationIdFor({ headers: { 'x-correlation-id': 'task-1:attempt/2+x=y@z' } })).toBe(
      'task-1:attempt/2+x=y@z',
    );
    for (const bad of [undefined, '', 'has space', 'x'.repeat(129), ['a', 'b'], 'nul\u0000']) {
      expect(correlationIdFor({ headers: { 'x-correlation-id': bad } })).toMatch(uuid);
    }
  });
});

// One real llama-server pool; a dispatch over HTTP/1.1 (the API) and one over h2c (the dispatch
// listener), each with the id orchestratord would send.
let h: Harness;
let h2c: Awaited<ReturnType<typeof buildDispatchApp>>;
let h2cOrigin: string;
beforeAll(async () => {
  h = await startHarness({ pools: [{ id: 'corr', model: 'synthetic:llama', ctx: 256, threads: 1 }] });
  await waitReady(h, 'corr');
  h2c = await buildDispatchApp(
    { manager: h.manager, logger: h.logger, apiToken: h.token },
    { node: { id: 'test-node', addr: '127.0.0.1:0' } },
  );
  await h2c.listen({ host: '127.0.0.1', port: 0 });
  const a = h2c.server.address();
  h2cOrigin = `http://127.0.0.1:${typeof a === 'object' && a !== null ? a.port : 0}`;
}, 45 * 60_000);
afterAll(async () => {
  await h2c?.close();
  await h?.close();
});

/** Every line about the dispatch of `taskId` carries `correlationId`; the milestones are info lines. */
async function expectCorrelated(taskId: string, correlationId: string): Promise<void> {
  const ended = await until(
    () => h.logs.find((l) => l.task_id === taskId && l.msg === 'dispatch ended'),
    'dispatch ended logged',
    10_000,
  );
  const lines = h.logs.filter((l) => l.task_id === taskId);
  expect(lines.length).toBeGreaterThanOrEqual(3);
  expect(lines.every((l) => l.correlation_id === correlationId)).toBe(true);
  for (const msg of ['dispatch started', 'engine request sent', 'dispatch ended']) {
    expect(lines.find((l) => l.msg === msg)).toMatchObject({
      level: 30,
      pool_id: 'corr',
      task_id: taskId,
      correlation_id: correlationId,
    });
  }
  expect(ended).toMatchObject({ outcome: 'end', tokens_out: 3 });
}

describe('X-Correlation-Id across the dispatch hop', () => {
  it('HTTP/1.1: the id is echoed and on every line of the dispatch, engine request and end included', async () => {
    const taskId = randomUUID();
    const correlationId = `task-${taskId}`;
    const res = await request(`${h.url}/v2/pools/corr/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${h.token}`,
        'content-type': 'application/json',
        'x-correlation-id': correlationId,
      },
      body: JSON.stringify({ task_id: taskId, prompt: 'Hello', max_tokens: 3, greedy: true }),
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-correlation-id']).toBe(correlationId);
    expect(
      (await res.body.text())
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { type: string }).type)
        .at(-1),
    ).toBe('end');
    await expectCorrelated(taskId, correlationId);
  });

  it('h2c: the same over the dispatch listener', async () => {
    const taskId = randomUUID();
    const correlationId = `h2-${taskId}`;
    const agent = new Agent({ factory: (origin, opts) => new H2CClient(origin, opts) });
    try {
      const res = await agent.request({
        origin: h2cOrigin,
        path: '/v2/pools/corr/completions',
        method: 'POST',
        headers: {
          authorization: `Bearer ${h.token}`,
          'content-type': 'application/json',
          'x-correlation-id': correlationId,
        },
        body: JSON.stringify({ task_id: taskId, prompt: 'Hello', max_tokens: 3, greedy: true }),
      });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-correlation-id']).toBe(correlationId);
      await res.body.text();
    } finally {
      await agent.close();
    }
    await expectCorrelated(taskId, correlationId);
  });

  it('a refused dispatch (unknown pool) echoes the id too', async () => {
    const res = await request(`${h.url}/v2/pools/nope/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${h.token}`,
        'content-type': 'application/json',
        'x-correlation-id': 'refused-1',
      },
      body: JSON.stringify({ task_id: randomUUID(), prompt: 'Hello', max_tokens: 3 }),
    });
    expect(res.statusCode).toBe(404);
    expect(res.headers['x-correlation-id']).toBe('refused-1');
    await res.body.dump();
  });
});
