/**
 * Shared by this package's tests only (not exported). Reads `process.env` on purpose: it is a
 * test entry point, not product code.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import type { Logger } from 'pino';
import { ensureSourceTree } from '@llama-orch/llamacpp-source';
import { SYNTHETIC_VOCAB_FILE } from './synthetic-model.js';

export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'pnpm-workspace.yaml'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error('no pnpm-workspace.yaml above this file');
    dir = parent;
  }
}

/** `$LLORCH_TEST_CACHE_DIR`, else `<repo>/.cache/llama-orch`: where the llama.cpp tree and engine are shared. */
export function sharedTestCacheDir(): string {
  const fromEnv = process.env.LLORCH_TEST_CACHE_DIR;
  return fromEnv ? resolve(fromEnv) : join(repoRoot(), '.cache', 'llama-orch');
}

/** The SPM vocab file from the bundled llama.cpp tree (materialised once in the shared cache). */
export async function testVocabPath(): Promise<string> {
  const tree = await ensureSourceTree({ cacheDir: sharedTestCacheDir(), source: { kind: 'bundle' } });
  return join(tree.dir, SYNTHETIC_VOCAB_FILE);
}

export function testLogger(): Logger {
  return pino({ level: process.env.LOG_LEVEL ?? 'silent' });
}

/** Temp dirs removed by `cleanup()`. */
export class TempDirs {
  private readonly dirs: string[] = [];
  async make(prefix = 'llorch-mp-'): Promise<string> {
    const d = await mkdtemp(join(tmpdir(), prefix));
    this.dirs.push(d);
    return d;
  }
  async cleanup(): Promise<void> {
    await Promise.all(this.dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
  }
}

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

export interface TestServer {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  requests: SeenRequest[];
  close(): Promise<void>;
}

/** A real HTTP server on loopback, port 0, recording every request. */
export async function startServer(
  handler: (req: IncomingMessage, res: ServerResponse, n: number) => void,
): Promise<TestServer> {
  const requests: SeenRequest[] = [];
  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    handler(req, res, requests.length);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}

/**
 * Serves `data` honouring `Range: bytes=N-` (206), else the whole body (200). With an `etag`,
 * sends it and answers a Range whose `If-Range` names another version with the whole body.
 */
export function serveBytes(data: Buffer, req: IncomingMessage, res: ServerResponse, etag?: string): void {
  const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
  const ifRange = req.headers['if-range'];
  const etagHeader = etag ? { etag } : {};
  if (m && (ifRange === undefined || ifRange === etag)) {
    const start = Number(m[1]);
    if (start >= data.length) {
      res.writeHead(416, { 'content-range': `bytes */${data.length}` });
      res.end();
      return;
    }
    res.writeHead(206, {
      ...etagHeader,
      'content-length': data.length - start,
      'content-range': `bytes ${start}-${data.length - 1}/${data.length}`,
    });
    res.end(data.subarray(start));
    return;
  }
  res.writeHead(200, { ...etagHeader, 'content-length': data.length, 'content-type': 'application/octet-stream' });
  res.end(data);
}
