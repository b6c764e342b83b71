import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { makeApp, type TestApp } from '../testing/test-helpers.js';

interface OpenApiDoc {
  openapi: string;
  paths: Record<string, Record<string, { tags?: string[]; security?: unknown[] }>>;
}

describe('served API docs', () => {
  let t: TestApp | undefined;
  afterEach(async () => t?.close());

  it('/openapi.json (no token) lists every route, /v1 included', async () => {
    t = await makeApp();
    const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    const doc = JSON.parse(res.body) as OpenApiDoc;
    expect(doc.openapi).toBe('3.1.0');
    for (const path of [
      '/v1/chat/completions',
      '/v1/completions',
      '/v1/models',
      '/v2/tasks',
      '/v2/tasks/{id}/events',
      '/v2/nodes/register',
      '/v2/pools',
      '/healthz',
      '/readyz',
      '/v2/dashboard',
      '/v2/dashboard/events',
      '/',
    ]) {
      expect(Object.keys(doc.paths), path).toContain(path);
    }
    expect(doc.paths['/v2/tasks']?.post?.tags).toEqual(['data plane']);
    expect(doc.paths['/v2/tasks']?.post?.security).toEqual([{ bearer: [] }]);
    expect(doc.paths['/healthz']?.get?.security).toEqual([]);
    expect(doc.paths['/v2/dashboard/events']?.get?.security).toEqual([{ bearer: [] }]);
    expect(doc.paths['/']?.get?.security).toEqual([]);
  });

  it('/docs is an HTML page whose assets are local and load (real socket, no token)', async () => {
    t = await makeApp();
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
    const page = await request(`${base}/docs`);
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    const html = await page.body.text();
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] ?? '');
    expect(assets.length).toBeGreaterThanOrEqual(4);
    expect(assets.filter((a) => /^(https?:)?\/\//.test(a))).toEqual([]); // nothing from another host
    for (const asset of assets) {
      const res = await request(new URL(asset, `${base}/docs`).toString());
      expect(res.statusCode, asset).toBe(200);
      await res.body.dump();
    }
    expect(assets).toEqual(
      expect.arrayContaining(['/docs/static/swagger-ui-bundle.js', '/docs/static/swagger-initializer.js']),
    );
    // The page reads the document from the same server.
    const init = await request(`${base}/docs/static/swagger-initializer.js`);
    const initText = await init.body.text();
    expect(initText).toContain('"validatorUrl":null'); // no badge fetched from validator.swagger.io
    const json = await request(`${base}/docs/json`);
    expect(json.statusCode).toBe(200);
    expect(Object.keys(((await json.body.json()) as OpenApiDoc).paths)).toContain('/v2/tasks');
    // Everything else still needs the token.
    const other = await request(`${base}/v2/nodes`);
    expect(other.statusCode).toBe(401);
    await other.body.dump();
  });
});
