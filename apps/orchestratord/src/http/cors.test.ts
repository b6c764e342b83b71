import { afterEach, describe, expect, it } from 'vitest';
import { makeApp, taskBody, type TestApp } from '../testing/test-helpers.js';

const ALLOWED = 'https://app.example';

describe('CORS (ORCHD_CORS_ORIGINS)', () => {
  let t: TestApp | undefined;
  afterEach(async () => t?.close());

  const preflight = (origin: string, url: string) =>
    t!.app.inject({
      method: 'OPTIONS',
      url,
      headers: {
        origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });

  it('answers preflights on /v2 and /v1 from an allowed origin with 204 and the headers, without a token', async () => {
    t = await makeApp({ cors_origins: `${ALLOWED}, http://localhost:5173` });
    for (const url of ['/v2/tasks', '/v1/chat/completions', '/v2/tasks/abc/cancel']) {
      const res = await preflight(ALLOWED, url);
      expect(res.statusCode, url).toBe(204);
      expect(res.headers['access-control-allow-origin']).toBe(ALLOWED);
      expect(String(res.headers['access-control-allow-methods'])).toContain('POST');
      const allowed = String(res.headers['access-control-allow-headers']).toLowerCase();
      expect(allowed).toContain('authorization');
      expect(allowed).toContain('content-type');
      expect(allowed).toContain('x-api-key');
      expect(res.headers['access-control-max-age']).toBe('600');
      expect(res.headers['x-correlation-id']).toBeDefined();
    }
  });

  it('actual requests expose X-Correlation-Id (401s included); a disallowed origin gets no allow-origin', async () => {
    t = await makeApp({ cors_origins: ALLOWED });
    const ok = await t.app.inject({ method: 'GET', url: '/v2/nodes', headers: { ...t.auth, origin: ALLOWED } });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['access-control-allow-origin']).toBe(ALLOWED);
    expect(String(ok.headers['access-control-expose-headers']).toLowerCase()).toContain('x-correlation-id');
    const refused = await t.app.inject({
      method: 'POST',
      url: '/v2/tasks',
      headers: { origin: ALLOWED },
      payload: taskBody(),
    });
    expect(refused.statusCode).toBe(401);
    expect(refused.headers['access-control-allow-origin']).toBe(ALLOWED);

    const other = await preflight('https://evil.example', '/v2/tasks');
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
    const otherGet = await t.app.inject({
      method: 'GET',
      url: '/v2/nodes',
      headers: { ...t.auth, origin: 'https://evil.example' },
    });
    expect(otherGet.statusCode).toBe(200);
    expect(otherGet.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('is off by default: no CORS headers, a preflight is an unknown route', async () => {
    t = await makeApp();
    const res = await preflight(ALLOWED, '/v2/tasks');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    expect(res.statusCode).toBe(401);
    const get = await t.app.inject({ method: 'GET', url: '/v2/nodes', headers: { ...t.auth, origin: ALLOWED } });
    expect(get.headers['access-control-allow-origin']).toBeUndefined();
  });
});
