import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { copyFile, cp, mkdir, readdir, readFile, readlink, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { repoRoot } from '@llama-orch/e2e-haiku';

/** Identity of a file, to prove the suite's inputs were never written to. */
export async function fileIdentity(path: string): Promise<string> {
  const st = await stat(path);
  const sha = createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
  return `${st.size}:${st.mtimeMs}:${sha}`;
}

/** The llama-server binary a live engine runs (`/proc/<pid>/exe`). */
export async function engineBinary(pid: number): Promise<string> {
  return readlink(`/proc/${pid}/exe`);
}

/**
 * An isolated cache dir whose `sources/<commit>` entries link to the shared cache's complete
 * llama.cpp checkouts (the synthetic model's vocab comes from there), so nothing the hostile
 * cases write can touch the shared cache.
 */
export async function isolatedCache(dir: string, shared: string): Promise<string> {
  const cache = join(dir, 'cache');
  await mkdir(join(cache, 'sources'), { recursive: true });
  const sources = join(shared, 'sources');
  for (const name of await readdir(sources).catch(() => [] as string[])) {
    const complete = await stat(join(sources, name, '.llorch-source-complete')).then(
      () => true,
      () => false,
    );
    if (complete) await symlink(join(sources, name), join(cache, 'sources', name));
  }
  return cache;
}

/** A git repo of the broken-engine fixture (a CMake build that fails half-way); returns its path. */
export async function brokenEngineRepo(dir: string): Promise<string> {
  const repo = join(dir, 'broken-engine');
  await cp(join(repoRoot(), 'test-harness', 'chaos', 'fixtures', 'broken-engine'), repo, { recursive: true });
  const env = { GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' };
  for (const args of [
    ['init', '--quiet', '-b', 'main'],
    ['add', '.'],
    ['commit', '--quiet', '-m', 'broken engine fixture'],
  ]) {
    await execa('git', args, { cwd: repo, env });
  }
  return repo;
}

/** Damaged copies of a real GGUF: cut in half, and with garbage over its header's KV table. */
export async function damagedModels(
  goodModel: string,
  dir: string,
): Promise<{ good: string; truncated: string; corrupt: string; outside: string }> {
  const bytes = await readFile(goodModel);
  const good = join(dir, 'good.gguf');
  await copyFile(goodModel, good);
  const truncated = join(dir, 'truncated.gguf');
  await writeFile(truncated, bytes.subarray(0, Math.floor(bytes.length / 2)));
  const corrupt = join(dir, 'corrupt.gguf');
  const c = Buffer.from(bytes);
  // keep the magic and version, scramble counts and the first KV records
  for (let i = 8; i < 200; i++) c[i] = (i * 151 + 7) & 0xff;
  await writeFile(corrupt, c);
  const outside = join(dir, 'outside.gguf');
  await copyFile(goodModel, outside);
  return { good, truncated, corrupt, outside };
}

/** An HTTP server that is not an engine: `/health` 200, everything else an HTML page. */
export async function notAnEngine(): Promise<{ url: string; server: Server; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    if (req.url === '/health') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      return;
    }
    res
      .writeHead(200, { 'content-type': 'text/html' })
      .end('<html><body>I am a web page, not llama-server</body></html>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  return { url: `http://127.0.0.1:${port}`, server, hits };
}
