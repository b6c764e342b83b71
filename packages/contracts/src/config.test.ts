import { describe, expect, it } from 'vitest';
import { OrchestratorConfigSchema, PoolManagerConfigSchema, formatIssues } from './index.js';

describe('pool-managerd config', () => {
  const minimal = { node: { id: 'dev-node' }, pools: [{ id: 'cpu0', model: 'synthetic:llama' }] };
  it('fills defaults', () => {
    const cfg = PoolManagerConfigSchema.parse(minimal);
    expect(cfg.node.addr).toBe('127.0.0.1:9200');
    expect(cfg.pools[0]).toMatchObject({ gpu: 'off', source: { kind: 'bundle' }, slots: 1, port: 0, determinism: false });
  });
  it('reports every problem at once, unknown keys included', () => {
    const r = PoolManagerConfigSchema.safeParse({
      node: { id: 'dev-node', colour: 'blue' },
      pools: [{ id: 'cpu0', model: 'synthetic:llama', gpu: 'sometimes', slots: 0 }, { id: 'cpu0', model: 'x' }],
      extra: true,
    });
    expect(r.success).toBe(false);
    const text = formatIssues(r.error!);
    expect(text).toContain('node: Unrecognized key');
    expect(text).toContain('pools[0].gpu');
    expect(text).toContain('pools[0].slots');
    expect(text).toContain('(root): Unrecognized key');
  });
  it('rejects duplicate pool ids and malformed build flags', () => {
    const dup = PoolManagerConfigSchema.safeParse({ node: { id: 'n' }, pools: [{ id: 'a', model: 'm' }, { id: 'a', model: 'm' }] });
    expect(dup.success && 'no error').toBe(false);
    expect(formatIssues(dup.error!)).toContain("pools[1].id: duplicate pool id 'a'");
    expect(PoolManagerConfigSchema.safeParse({ node: { id: 'n' }, pools: [{ id: 'a', model: 'm', build_flags: ['--evil'] }] }).success).toBe(false);
  });
});

describe('orchestratord config', () => {
  it('defaults and coercion from env strings', () => {
    const cfg = OrchestratorConfigSchema.parse({ admission_capacity: '32', admission_policy: 'drop-lru' });
    expect(cfg).toMatchObject({ addr: '127.0.0.1:8080', admission_capacity: 32, admission_policy: 'drop-lru', placement_strategy: 'cache-aware' });
  });
  it('rejects short tokens and bad policies together', () => {
    const r = OrchestratorConfigSchema.safeParse({ api_token: 'short', admission_policy: 'random', addr: 'nope' });
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => i.path[0]).sort()).toEqual(['addr', 'admission_policy', 'api_token']);
  });
});

describe('orchestratord CORS origins', () => {
  it('splits a comma-separated list and checks each origin', () => {
    expect(OrchestratorConfigSchema.parse({ cors_origins: 'https://a.example, http://localhost:5173' }).cors_origins).toEqual(['https://a.example', 'http://localhost:5173']);
    expect(OrchestratorConfigSchema.parse({ cors_origins: '*' }).cors_origins).toEqual(['*']);
    expect(OrchestratorConfigSchema.parse({}).cors_origins).toBeUndefined();
    const bad = OrchestratorConfigSchema.safeParse({ cors_origins: 'https://a.example/path,ftp://x' });
    expect(bad.success).toBe(false);
    expect(formatIssues(bad.error!)).toContain('cors_origins');
  });
});
