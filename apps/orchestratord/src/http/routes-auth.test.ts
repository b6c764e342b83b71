import { afterEach, describe, expect, it } from 'vitest';
import { ErrorEnvelopeSchema } from '@llama-orch/contracts';
import { InternalError } from '../errors.js';
import { tokenMatches } from '@llama-orch/daemon-support';
import { makeApp, snapshot, taskBody, TOKEN, type TestApp } from '../testing/test-helpers.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('auth and correlation', () => {
  let t: TestApp;
  afterEach(async () => t?.close());

  it('requires the Bearer token on every route but /metrics', async () => {
    t = await makeApp();
    const cases = [
      { headers: {}, status: 401 },
      { headers: { authorization: `Bearer ${TOKEN.slice(0, -1)}x` }, status: 401 }, // same length, wrong
      { headers: { authorization: 'Bearer short' }, status: 401 }, // different length
      { headers: { authorization: `Bearer ${TOKEN}extra` }, status: 401 },
      { headers: { authorization: `Basic ${TOKEN}` }, status: 401 },
      { headers: { authorization: `Bearer ${TOKEN}` }, status: 200 },
      { headers: { authorization: `bearer ${TOKEN}` }, status: 200 },
    ];
    for (const c of cases) {
      const res = await t.app.inject({ method: 'GET', url: '/v2/nodes', headers: c.headers });
      expect(res.statusCode, JSON.stringify(c.headers)).toBe(c.status);
      expect(res.headers['x-correlation-id']).toMatch(UUID);
      if (c.status === 401) {
        const body = ErrorEnvelopeSchema.parse(res.json());
        expect(body).toMatchObject({ code: 'UNAUTHORIZED', retriable: false });
        expect(res.headers['content-type']).toMatch(/application\/json/);
      }
    }
    const metrics = await t.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    expect(metrics.headers['x-correlation-id']).toMatch(UUID);
    // Unknown routes need auth too (no route discovery without a token).
    expect((await t.app.inject({ method: 'GET', url: '/nope' })).statusCode).toBe(401);
  });

  // tokenMatches compares SHA-256 digests with timingSafeEqual (constant time by construction); a
  // timing measurement would only flake, so this checks what it decides, at every length.
  it('token comparison: only the exact token matches, whatever the lengths (empty, prefix, longer, one character off)', () => {
    expect(tokenMatches(TOKEN, TOKEN)).toBe(true);
    expect(tokenMatches('', TOKEN)).toBe(false);
    expect(tokenMatches(TOKEN.slice(0, -1), TOKEN)).toBe(false);
    expect(tokenMatches(`${TOKEN}${TOKEN}`, TOKEN)).toBe(false);
    const last = TOKEN.at(-1) === 'x' ? 'y' : 'x';
    expect(tokenMatches(`${TOKEN.slice(0, -1)}${last}`, TOKEN)).toBe(false);
  });

  it('without a configured token every route is open (config allows that only on loopback)', async () => {
    t = await makeApp({ api_token: undefined });
    expect((await t.app.inject({ method: 'GET', url: '/v2/nodes' })).statusCode).toBe(200);
  });

  it('echoes a valid X-Correlation-Id and replaces an invalid one, on 2xx, 401, 404 and 400', async () => {
    t = await makeApp();
    const ok = await t.app.inject({
      method: 'GET',
      url: '/v2/nodes',
      headers: { ...t.auth, 'x-correlation-id': 'req-42.abc' },
    });
    expect(ok.headers['x-correlation-id']).toBe('req-42.abc');
    const denied = await t.app.inject({ method: 'GET', url: '/v2/nodes', headers: { 'x-correlation-id': 'deny-1' } });
    expect(denied.statusCode).toBe(401);
    expect(denied.headers['x-correlation-id']).toBe('deny-1');
    const missing = await t.app.inject({
      method: 'GET',
      url: '/v2/nowhere',
      headers: { ...t.auth, 'x-correlation-id': 'nf-1' },
    });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ code: 'NOT_FOUND' });
    expect(missing.headers['x-correlation-id']).toBe('nf-1');
    const bad = await t.app.inject({
      method: 'POST',
      url: '/v2/tasks',
      headers: { ...t.auth, 'x-correlation-id': 'bad-1' },
      payload: { nope: 1 },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.headers['x-correlation-id']).toBe('bad-1');
    const invalid = await t.app.inject({
      method: 'GET',
      url: '/v2/nodes',
      headers: { ...t.auth, 'x-correlation-id': 'has spaces and "quotes"' },
    });
    expect(invalid.headers['x-correlation-id']).toMatch(UUID);
    const tooLong = await t.app.inject({
      method: 'GET',
      url: '/v2/nodes',
      headers: { ...t.auth, 'x-correlation-id': 'x'.repeat(200) },
    });
    expect(tooLong.headers['x-correlation-id']).toMatch(UUID);
  });

  it('logs every line of a request with its correlation id, narrates admission, never logs the token or prompt', async () => {
    t = await makeApp();
    await t.app.inject({
      method: 'POST',
      url: '/v2/nodes/register',
      headers: t.auth,
      payload: {
        node_id: 'n1',
        machine_id: 'm',
        address: 'http://127.0.0.1:1',
        pools: [snapshot({ pool_id: 'p', slots_free: 0 })],
        capabilities: { gpus: [], cpu_cores: 1, ram_total_bytes: 1 },
        version: 'x',
      },
    });
    const body = taskBody({ prompt: 'SECRET-PROMPT-TEXT' });
    const res = await t.app.inject({
      method: 'POST',
      url: '/v2/tasks',
      headers: { ...t.auth, 'x-correlation-id': 'corr-xyz' },
      payload: body,
    });
    expect(res.statusCode).toBe(202);
    const lines = t.logs.records().filter((r) => r.correlation_id === 'corr-xyz');
    const msgs = lines.map((r) => r.msg);
    // Access lines are debug (this logger captures debug); the task narration is info.
    expect(msgs).toEqual(expect.arrayContaining(['task admitted', 'request completed']));
    expect(lines.find((r) => r.msg === 'request completed')).toMatchObject({
      level: 20,
      method: 'POST',
      url: '/v2/tasks',
      status: 202,
    });
    const admitted = lines.find((r) => r.msg === 'task admitted');
    expect(admitted).toMatchObject({ task_id: body.task_id, queue_position: 0 });
    expect(String(admitted?.human)).toMatch(/queued at position 0/);
    const all = t.logs.lines.join('\n');
    expect(all).not.toContain(TOKEN);
    expect(all).not.toContain('SECRET-PROMPT-TEXT');
  });

  it('maps unexpected errors to a 500 INTERNAL envelope and typed errors to their status', async () => {
    t = await makeApp();
    t.app.get('/test/boom', async () => {
      throw new Error('kaboom');
    });
    t.app.get('/test/typed', async () => {
      throw new InternalError('typed failure', { retriable: true });
    });
    const boom = await t.app.inject({
      method: 'GET',
      url: '/test/boom',
      headers: { ...t.auth, 'x-correlation-id': 'c-500' },
    });
    expect(boom.statusCode).toBe(500);
    expect(ErrorEnvelopeSchema.parse(boom.json())).toEqual({
      code: 'INTERNAL',
      message: 'internal error',
      retriable: false,
    });
    expect(boom.headers['x-correlation-id']).toBe('c-500');
    const typed = await t.app.inject({ method: 'GET', url: '/test/typed', headers: t.auth });
    expect(typed.json()).toMatchObject({ code: 'INTERNAL', message: 'typed failure', retriable: true });
    expect(t.logs.records().some((r) => r.msg === 'request failed' && r.correlation_id === 'c-500')).toBe(true);
  });
});
