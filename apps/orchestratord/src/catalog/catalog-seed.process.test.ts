// Process level: the built daemon (dist/main.js) with ORCHD_CATALOG_FILE. An invalid file refuses
// the start (exit 1, one fatal CONFIG_INVALID line naming the file and the entry, nothing listens);
// a valid one is registered once it listens (its `catalog file` line), and a restart keeps what
// operators changed.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { TOKEN } from '../testing/test-helpers.js';

const APP_DIR = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
const MAIN = join(APP_DIR, 'dist', 'main.js');

beforeAll(() => {
  execFileSync('npx', ['tsc', '--build', APP_DIR], { cwd: APP_DIR, stdio: 'inherit' });
}, 120_000);

interface Run {
  /** The base URL once it listens and logged its `catalog file` line; undefined when it exited first. */
  url: Promise<string | undefined>;
  exit: Promise<number | null>;
  out: () => string;
  stop: () => Promise<number | null>;
}

function run(env: Record<string, string>): Run {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', ORCHD_ADDR: '127.0.0.1:0', LLORCH_API_TOKEN: TOKEN, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let text = '';
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = new Promise<string | undefined>((resolve) => {
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const lines = text.split('\n');
      const line = lines.find((l) => l.includes('"msg":"listening"'));
      if (line !== undefined && lines.some((l) => l.includes('"msg":"catalog file"')))
        resolve((JSON.parse(line) as { url: string }).url);
    });
    void exit.then(() => resolve(undefined));
  });
  return {
    url,
    exit,
    out: () => text,
    stop: () => {
      child.kill('SIGTERM');
      return exit;
    },
  };
}

async function catalogIds(url: string): Promise<Array<[string, string[]]>> {
  const res = await request(`${url}/v2/catalog/models`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.statusCode).toBe(200);
  const body = (await res.body.json()) as { models: Array<{ id: string; aliases: string[] }> };
  return body.models.map((m) => [m.id, m.aliases]);
}

describe('orchestratord with ORCHD_CATALOG_FILE', () => {
  it('refuses to start on an invalid file: exit 1, one fatal CONFIG_INVALID line naming the file and the entry', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'catalog-seed-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'catalog.yaml');
    await writeFile(file, 'models:\n  - ref: fine\n  - ref: m2\n    serve: chat\n');
    const r = run({ ORCHD_CATALOG_FILE: file });
    expect(await r.url).toBeUndefined();
    expect(await r.exit).toBe(1);
    const lines = r
      .out()
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as { level: number; code?: string; msg: string; problems?: string[] });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 60, code: 'CONFIG_INVALID' });
    expect(lines[0]!.problems).toHaveLength(1);
    expect(lines[0]!.problems![0]).toMatch(
      new RegExp(`^ORCHD_CATALOG_FILE: ${file}: models\\[1\\] \\(ref 'm2'\\): serve: `),
    );
    expect(lines[0]!.msg).toContain(lines[0]!.problems![0]);

    const missing = run({ ORCHD_CATALOG_FILE: join(dir, 'nope.yaml') });
    expect(await missing.exit).toBe(1);
    expect(missing.out()).toContain(`ORCHD_CATALOG_FILE: ${join(dir, 'nope.yaml')}: cannot read it (ENOENT)`);
  });

  it('registers the file at start; after a restart what an operator changed stays', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'catalog-seed-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'catalog.yaml');
    await writeFile(file, 'models:\n  - ref: m1\n    aliases: [one]\n  - ref: m2\n    serve: embeddings\n');
    const env = { ORCHD_CATALOG_FILE: file, ORCHD_STATE_DIR: join(dir, 'state') };
    const first = run(env);
    const url = await first.url;
    expect(url, first.out()).toBeDefined();
    expect(await catalogIds(url!)).toEqual([
      ['m1', ['one']],
      ['m2', []],
    ]);
    // the operator renames m1's alias and removes m2
    const put = await request(`${url!}/v2/catalog/models`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ref: 'm1', aliases: ['uno'] }),
    });
    expect(put.statusCode).toBe(200);
    await put.body.dump();
    const del = await request(`${url!}/v2/catalog/models/m2`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(del.statusCode).toBe(204);
    await del.body.dump();
    expect(await first.stop()).toBe(0);

    const second = run(env);
    const again = await second.url;
    expect(again, second.out()).toBeDefined();
    // m1 as the operator left it; m2, absent, registered from the file again
    expect(await catalogIds(again!)).toEqual([
      ['m1', ['uno']],
      ['m2', []],
    ]);
    expect(await second.stop()).toBe(0);
  });
});
