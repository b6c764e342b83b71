import { createHash } from 'node:crypto';
import { readFile, readdir, stat, writeFile, mkdir } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Agent } from 'undici';
import { ModelProvisionError, ModelProvisioner, parseSyntheticParams, writeSyntheticModel } from './index.js';
import type { ModelProgress, ModelProvisionerOptions } from './index.js';
import { TempDirs, serveBytes, startServer, testLogger, testVocabPath } from './test-helpers.js';
import type { TestServer } from './test-helpers.js';

const temp = new TempDirs();
let model: Buffer;
let modelSha: string;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  const dir = await temp.make();
  const p = join(dir, 'served.gguf');
  await writeSyntheticModel(parseSyntheticParams('seed=5'), p, await testVocabPath());
  model = await readFile(p);
  modelSha = createHash('sha256').update(model).digest('hex');
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(() => temp.cleanup());

async function server(handler: Parameters<typeof startServer>[0]): Promise<TestServer> {
  const s = await startServer(handler);
  cleanups.push(() => s.close());
  return s;
}

async function provisioner(
  extra: Partial<ModelProvisionerOptions> = {},
): Promise<{ p: ModelProvisioner; cacheDir: string }> {
  const cacheDir = extra.cacheDir ?? (await temp.make());
  const p = new ModelProvisioner({
    cacheDir,
    logger: testLogger(),
    allowInsecureHttp: true,
    retry: { attempts: 3, baseMs: 10, maxMs: 50 },
    progressTty: false,
    ...extra,
  });
  cleanups.push(() => p.close());
  return { p, cacheDir };
}

async function errorOf(p: Promise<unknown>): Promise<ModelProvisionError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ModelProvisionError);
  return err as ModelProvisionError;
}

const listDir = (d: string): Promise<string[]> => readdir(d).catch(() => []);

describe('downloads', () => {
  it('downloads, verifies and stores by digest; a second ensure needs no network', async () => {
    const s = await server((req, res) => serveBytes(model, req, res));
    const { p, cacheDir } = await provisioner();
    const events: ModelProgress[] = [];
    const r = await p.ensure(`${s.origin}/models/tiny.gguf`, { sha256: modelSha, onProgress: (e) => events.push(e) });
    expect(r).toMatchObject({
      ref: `${s.origin}/models/tiny.gguf`,
      sha256: modelSha,
      size_bytes: model.length,
      source: 'https',
      local_path: join(cacheDir, 'models', 'sha256', `${modelSha}.gguf`),
      gguf: { architecture: 'llama', context_length: 256, tensor_count: 20 },
    });
    expect(r.id).toMatch(/^tiny-[0-9a-f]{12}$/);
    expect((await readFile(r.local_path)).equals(model)).toBe(true);
    expect(events.at(-1)).toEqual({ bytes_done: model.length, bytes_total: model.length });
    expect(await listDir(join(cacheDir, 'models', 'tmp'))).toEqual([]);
    const again = await p.ensure(`${s.origin}/models/tiny.gguf`);
    expect(again.local_path).toBe(r.local_path);
    expect(s.requests).toHaveLength(1);
    expect((await p.catalog.get(r.id))?.provenance).toEqual({
      source: 'https',
      detail: `${s.origin}/models/tiny.gguf`,
    });
  });

  it('refuses a wrong digest: temp file deleted, nothing stored or catalogued', async () => {
    const s = await server((req, res) => serveBytes(model, req, res));
    const { p, cacheDir } = await provisioner();
    const wrong = 'ab'.repeat(32);
    const err = await errorOf(p.ensure(`${s.origin}/m.gguf`, { sha256: wrong }));
    expect(err.code).toBe('DIGEST_MISMATCH');
    expect(err.message).toContain(`expected ${wrong}, got ${modelSha}`);
    expect(err.context).toMatchObject({ expected: wrong, actual: modelSha });
    expect(await listDir(join(cacheDir, 'models', 'tmp'))).toEqual([]);
    expect(await listDir(join(cacheDir, 'models', 'sha256'))).toEqual([]);
    expect(await p.catalog.list()).toEqual([]);
  });

  it('resumes with Range after the connection drops half-way', async () => {
    const half = Math.floor(model.length / 2);
    const s = await server((req, res, n) => {
      if (n === 1) {
        res.writeHead(200, { 'content-length': model.length });
        // the pause lets the client drain what it received: undici drops unread bytes on error
        res.write(model.subarray(0, half), () => setTimeout(() => res.socket?.destroy(), 300));
        return;
      }
      serveBytes(model, req, res);
    });
    const { p } = await provisioner();
    const r = await p.ensure(`${s.origin}/m.gguf`);
    expect(s.requests).toHaveLength(2);
    expect(s.requests[0]?.headers.range).toBeUndefined();
    expect(s.requests[1]?.headers.range).toBe(`bytes=${half}-`);
    expect(r.sha256).toBe(modelSha);
    expect(r.size_bytes).toBe(model.length);
    expect((await readFile(r.local_path)).equals(model)).toBe(true);
  });

  it('keeps the bytes of a failed download and resumes them on the next ensure', async () => {
    const half = Math.floor(model.length / 2);
    const s = await server((req, res, n) => {
      if (n === 1) {
        res.writeHead(200, { 'content-length': model.length });
        res.write(model.subarray(0, half), () => setTimeout(() => res.socket?.destroy(), 300));
      } else if (n <= 3) {
        res.writeHead(502);
        res.end();
      } else {
        serveBytes(model, req, res);
      }
    });
    const { p, cacheDir } = await provisioner();
    const first = await errorOf(p.ensure(`${s.origin}/m.gguf`));
    expect(first.code).toBe('MODEL_FETCH_FAILED');
    const kept = await listDir(join(cacheDir, 'models', 'tmp'));
    expect(kept.filter((f) => f.endsWith('.partial'))).toHaveLength(1);
    const r = await p.ensure(`${s.origin}/m.gguf`, { sha256: modelSha });
    expect(s.requests.map((q) => q.headers.range)).toEqual([
      undefined,
      `bytes=${half}-`,
      `bytes=${half}-`,
      `bytes=${half}-`,
    ]);
    expect(r.size_bytes).toBe(model.length);
    expect(await listDir(join(cacheDir, 'models', 'tmp'))).toEqual([]);
  });

  it('lets one of two waiting callers give up without stopping the download', async () => {
    const s = await server((req, res) => {
      setTimeout(() => serveBytes(model, req, res), 500);
    });
    const { p } = await provisioner();
    const url = `${s.origin}/m.gguf`;
    const [quitter, stayer] = await Promise.allSettled([
      p.ensure(url, { signal: AbortSignal.timeout(100) }),
      p.ensure(url),
    ]);
    expect(quitter.status === 'rejected' && (quitter.reason as ModelProvisionError).code).toBe('DEADLINE_EXCEEDED');
    expect(stayer.status === 'fulfilled' && stayer.value.sha256).toBe(modelSha);
    expect(s.requests).toHaveLength(1);
  });

  it('starts over when the file changed between tries (If-Range with the first ETag)', async () => {
    const half = Math.floor(model.length / 2);
    const v2 = Buffer.from(model);
    v2.writeUInt8(v2[1_000_000]! ^ 0xff, 1_000_000); // same size, a tensor byte in the first half differs
    const v2Sha = createHash('sha256').update(v2).digest('hex');
    const s = await server((req, res, n) => {
      if (n === 1) {
        res.writeHead(200, { etag: '"v1"', 'content-length': model.length });
        res.write(model.subarray(0, half), () => setTimeout(() => res.socket?.destroy(), 300));
        return;
      }
      serveBytes(v2, req, res, '"v2"');
    });
    const { p } = await provisioner();
    const r = await p.ensure(`${s.origin}/m.gguf`);
    expect(s.requests[1]?.headers).toMatchObject({ range: `bytes=${half}-`, 'if-range': '"v1"' });
    expect(r.sha256).toBe(v2Sha);
    expect((await readFile(r.local_path)).equals(v2)).toBe(true);
  });

  it('starts over when the server ignores Range', async () => {
    const half = Math.floor(model.length / 3);
    const s = await server((_req, res, n) => {
      res.writeHead(200, { 'content-length': model.length });
      if (n === 1) res.write(model.subarray(0, half), () => setTimeout(() => res.socket?.destroy(), 300));
      else res.end(model);
    });
    const { p } = await provisioner();
    const r = await p.ensure(`${s.origin}/m.gguf`, { sha256: modelSha });
    expect(s.requests[1]?.headers.range).toBe(`bytes=${half}-`);
    expect(r.size_bytes).toBe(model.length);
  });

  it('retries 5xx with backoff and then fails typed; 404 and 401 are not retried', async () => {
    const s500 = await server((_req, res) => {
      res.writeHead(500);
      res.end('boom');
    });
    const { p } = await provisioner();
    const e500 = await errorOf(p.ensure(`${s500.origin}/m.gguf`));
    expect(e500.code).toBe('MODEL_FETCH_FAILED');
    expect(e500.message).toMatch(/after 3 attempts: server answered 500/);
    expect(e500.retriable).toBe(true);
    expect(s500.requests).toHaveLength(3);

    const s404 = await server((_req, res) => {
      res.writeHead(404);
      res.end();
    });
    const e404 = await errorOf(p.ensure(`${s404.origin}/missing.gguf`));
    expect(e404.code).toBe('MODEL_NOT_FOUND');
    expect(s404.requests).toHaveLength(1);

    const s401 = await server((_req, res) => {
      res.writeHead(401);
      res.end();
    });
    const e401 = await errorOf(p.ensure(`${s401.origin}/private.gguf`));
    expect(e401.code).toBe('MODEL_FETCH_FAILED');
    expect(e401.message).toMatch(/401.*token/);
    expect(s401.requests).toHaveLength(1);
  });

  it('recovers when a 503 is followed by success', async () => {
    const s = await server((req, res, n) => {
      if (n === 1) {
        res.writeHead(503);
        res.end();
        return;
      }
      serveBytes(model, req, res);
    });
    const { p } = await provisioner();
    expect((await p.ensure(`${s.origin}/m.gguf`)).sha256).toBe(modelSha);
    expect(s.requests).toHaveLength(2);
  });

  it('stops a slow download at the deadline: typed error, temp file removed', async () => {
    const s = await server((_req, res) => {
      res.writeHead(200, { 'content-length': model.length });
      res.write(model.subarray(0, 4096));
      setTimeout(() => res.write(model.subarray(4096, 8192)), 400); // then nothing more
    });
    const { p, cacheDir } = await provisioner();
    const events: ModelProgress[] = [];
    const err = await errorOf(
      p.ensure(`${s.origin}/slow.gguf`, { signal: AbortSignal.timeout(1000), onProgress: (e) => events.push(e) }),
    );
    expect(err.code).toBe('DEADLINE_EXCEEDED');
    expect(events.at(-1)).toEqual({ bytes_done: 8192, bytes_total: model.length });
    expect(await listDir(join(cacheDir, 'models', 'tmp'))).toEqual([]);
    expect(await listDir(join(cacheDir, 'models', 'sha256'))).toEqual([]);
    expect(s.requests).toHaveLength(1);
  });

  it('refuses a download that is not GGUF and keeps nothing of it', async () => {
    const junk = Buffer.from('<html>not a model</html>'.repeat(100));
    const s = await server((req, res) => serveBytes(junk, req, res));
    const { p, cacheDir } = await provisioner();
    expect((await errorOf(p.ensure(`${s.origin}/page.gguf`))).code).toBe('INVALID_GGUF');
    expect(await listDir(join(cacheDir, 'models', 'tmp'))).toEqual([]);
    expect(await listDir(join(cacheDir, 'models', 'sha256'))).toEqual([]);
  });

  it('resolves hf: refs against the configured base, follows the redirect and sends the token', async () => {
    const s = await server((req, res) => {
      if (req.url?.includes('/resolve/main/')) {
        res.writeHead(302, { location: '/cdn/blob-1234' });
        res.end();
        return;
      }
      serveBytes(model, req, res);
    });
    const { p } = await provisioner({ hfBaseUrl: `${s.origin}/`, hfToken: 'hf_secret_test_token' });
    const r = await p.ensure('hf:some-org/tiny-repo/sub dir/tiny.gguf');
    expect(r).toMatchObject({ source: 'hf', sha256: modelSha, ref: 'hf:some-org/tiny-repo/sub dir/tiny.gguf' });
    expect(s.requests[0]?.url).toBe('/some-org/tiny-repo/resolve/main/sub%20dir/tiny.gguf');
    expect(s.requests[0]?.headers.authorization).toBe('Bearer hf_secret_test_token');
    expect(s.requests[1]?.url).toBe('/cdn/blob-1234');
  });

  it('does not carry the hf token across a redirect to another origin (the CDN)', async () => {
    const cdn = await server((req, res) => serveBytes(model, req, res));
    const hub = await server((_req, res) => {
      res.writeHead(302, { location: `${cdn.origin}/blob` });
      res.end();
    });
    const { p } = await provisioner({ hfBaseUrl: hub.origin, hfToken: 'hf_secret_test_token' });
    expect((await p.ensure('hf:o/r/m.gguf')).sha256).toBe(modelSha);
    expect(hub.requests[0]?.headers.authorization).toBe('Bearer hf_secret_test_token');
    expect(cdn.requests[0]?.headers.authorization).toBeUndefined();
  });

  it('does not send the hf token to plain https refs', async () => {
    const s = await server((req, res) => serveBytes(model, req, res));
    const { p } = await provisioner({ hfBaseUrl: s.origin, hfToken: 'hf_secret_test_token' });
    await p.ensure(`${s.origin}/m.gguf`);
    expect(s.requests[0]?.headers.authorization).toBeUndefined();
  });

  it('downloads once for concurrent ensures in one process and across provisioners sharing a cache', async () => {
    const s = await server((req, res) => {
      // slow enough that the callers overlap
      setTimeout(() => serveBytes(model, req, res), 300);
    });
    const { p, cacheDir } = await provisioner();
    const { p: other } = await provisioner({ cacheDir });
    const url = `${s.origin}/shared.gguf`;
    const results = await Promise.all([p.ensure(url), p.ensure(url), other.ensure(url)]);
    expect(new Set(results.map((r) => r.local_path)).size).toBe(1);
    expect(s.requests).toHaveLength(1);
  });

  it('downloads once when two processes ensure the same ref', async () => {
    const fixture = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'ensure-model.mjs');
    const s = await server((req, res) => {
      setTimeout(() => serveBytes(model, req, res), 500);
    });
    const cacheDir = await temp.make();
    const run = (): Promise<string> =>
      new Promise((resolve, reject) => {
        execFile(process.execPath, [fixture, cacheDir, `${s.origin}/two.gguf`], (err, stdout, stderr) =>
          err ? reject(new Error(`${err.message}: ${stderr}`)) : resolve(stdout),
        );
      });
    const outs = await Promise.all([run(), run()]);
    const paths = outs.map((o) => JSON.parse(o) as { local_path: string; sha256: string });
    expect(paths[0]).toEqual(paths[1]);
    expect(paths[0]?.sha256).toBe(modelSha);
    expect(s.requests).toHaveLength(1);
  });

  it('uses an injected dispatcher', async () => {
    const s = await server((req, res) => serveBytes(model, req, res));
    const agent = new Agent();
    cleanups.push(() => agent.close());
    let dispatched = 0;
    const counting = agent.compose((dispatch) => (opts, handler) => {
      dispatched++;
      return dispatch(opts, handler);
    });
    const { p } = await provisioner({ dispatcher: counting });
    await p.ensure(`${s.origin}/m.gguf`);
    expect(dispatched).toBeGreaterThan(0);
  });
});

describe('local files', () => {
  it('uses a file in place, resolving relative paths against baseDir', async () => {
    const baseDir = await temp.make();
    await mkdir(join(baseDir, 'models'));
    const path = join(baseDir, 'models', 'local.gguf');
    await writeFile(path, model);
    const { p, cacheDir } = await provisioner({ baseDir });
    const r = await p.ensure('./models/local.gguf', { sha256: modelSha });
    expect(r).toMatchObject({ local_path: path, sha256: modelSha, source: 'file', size_bytes: model.length });
    expect(await listDir(join(cacheDir, 'models', 'sha256'))).toEqual([]);
    const viaScheme = await p.ensure(`file:${path}`);
    expect(viaScheme.id).toBe(r.id);
    const entry = await p.catalog.get(r.id);
    expect(entry).toMatchObject({ local_path: path, ref: `file:${path}`, lifecycle: 'Active' });
  });

  it('fails typed for a missing file, a non-GGUF file and a digest mismatch (never deleting the file)', async () => {
    const baseDir = await temp.make();
    const { p } = await provisioner({ baseDir });
    expect((await errorOf(p.ensure('absent.gguf'))).code).toBe('MODEL_NOT_FOUND');
    await writeFile(join(baseDir, 'text.gguf'), 'hello world, not a model');
    expect((await errorOf(p.ensure('text.gguf'))).code).toBe('INVALID_GGUF');
    await writeFile(join(baseDir, 'm.gguf'), model);
    expect((await errorOf(p.ensure('m.gguf', { sha256: '0'.repeat(64) }))).code).toBe('DIGEST_MISMATCH');
    expect((await stat(join(baseDir, 'm.gguf'))).size).toBe(model.length);
    const vocabOnly = await testVocabPath();
    expect((await errorOf(p.ensure(vocabOnly))).message).toMatch(/no tensors/);
  });
});
