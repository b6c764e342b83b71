import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, runHaiku, startCluster, type Cluster } from './index.js';

// Both daemons' log lines, as an operator greps them: every field name is snake_case, whoever
// wrote the line (our code, Fastify, an error's own properties). Checked over a real cluster's
// start-up, a streamed task, an OpenAI chat, a refused request and a shutdown.
const cacheDir = process.env.LLORCH_TEST_CACHE_DIR ?? join(repoRoot(), '.cache', 'llama-orch');
const SNAKE = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;

/** Field names that are not snake_case, as `path.to.key`, in objects nested anywhere in `value`. */
function offendingKeys(value: unknown, path = ''): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => offendingKeys(v, `${path}[${i}]`));
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([k, v]) => {
    const at = path === '' ? k : `${path}.${k}`;
    return [...(SNAKE.test(k) ? [] : [at]), ...offendingKeys(v, at)];
  });
}

let cluster: Cluster;
beforeAll(async () => {
  cluster = await startCluster({
    model: 'synthetic:llama',
    nodes: 1,
    gpu: 'off',
    cacheDir,
    heartbeatMs: 500,
    readyTimeoutMs: 30 * 60_000,
  });
}, 31 * 60_000);
afterAll(async () => {
  await cluster?.close();
}, 60_000);

describe('log field names', () => {
  it('the check itself flags camelCase, kebab-case and nested offenders', () => {
    expect(
      offendingKeys({ pool_id: 'p', poolId: 'p', nested: { 'content-type': 'x', ok_key: [{ reqId: 1 }] } }),
    ).toEqual(['poolId', 'nested.content-type', 'nested.ok_key[0].reqId']);
  });

  it('are snake_case on every line of both daemons (start-up, tasks, errors, shutdown)', async () => {
    const url = cluster.orchestrator.url;
    const auth = { authorization: `Bearer ${cluster.token}`, 'content-type': 'application/json' };
    await runHaiku({
      orchUrl: url,
      token: cluster.token,
      model: 'synthetic:llama',
      seed: 7,
      maxTokens: 8,
      determinism: 'best_effort',
    });
    const chat = await request(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ model: 'synthetic:llama', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    });
    expect(chat.statusCode).toBe(200);
    await chat.body.dump();
    const bad = await request(`${url}/v2/tasks`, { method: 'POST', headers: auth, body: '{"model_ref": 5}' });
    expect(bad.statusCode).toBe(400);
    await bad.body.dump();
    const unauth = await request(`${url}/v2/pools`);
    expect(unauth.statusCode).toBe(401);
    await unauth.body.dump();
    await cluster.close();

    const logs = cluster.allLogs();
    // both daemons' lines, to the end of their shutdown
    expect(
      logs
        .filter((l) => l.json.msg === 'stopped')
        .map((l) => l.source.split(':')[0])
        .sort(),
    ).toEqual(['orchestratord', 'pool-managerd']);
    const offenders = logs.flatMap((l) =>
      offendingKeys(l.json).map((k) => `${l.source}: ${k} in "${String(l.json.msg)}"`),
    );
    expect([...new Set(offenders)]).toEqual([]);
  });
});
