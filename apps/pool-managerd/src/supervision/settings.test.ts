import { PoolManagerConfigSchema } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SUPERVISION, supervisionSettings } from './settings.js';

describe('supervision config', () => {
  it('defaults to the spec 50 numbers when absent', () => {
    expect(supervisionSettings(undefined)).toEqual(DEFAULT_SUPERVISION);
  });
  it('overrides only what the YAML sets', () => {
    const cfg = PoolManagerConfigSchema.parse({
      node: { id: 'n' },
      pools: [{ id: 'p', model: 'synthetic:llama' }],
      supervision: { breaker_cooldown_ms: 30_000, backoff_base_ms: 250 },
    });
    expect(supervisionSettings(cfg.supervision)).toEqual({
      ...DEFAULT_SUPERVISION,
      breakerCooldownMs: 30_000,
      backoffBaseMs: 250,
    });
  });
  it('rejects unknown and out-of-range keys', () => {
    const base = { node: { id: 'n' }, pools: [{ id: 'p', model: 'm' }] };
    expect(PoolManagerConfigSchema.safeParse({ ...base, supervision: { cooldown: 1 } }).success).toBe(false);
    expect(PoolManagerConfigSchema.safeParse({ ...base, supervision: { breaker_threshold: 0 } }).success).toBe(false);
  });
});
