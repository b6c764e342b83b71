import { describe, expect, it } from 'vitest';
import { PoolConfigSchema, type PoolConfigInput } from '@llama-orch/contracts';
import { buildEngineFlags, effectiveSlots, normaliseExtraFlags } from './engine-flags.js';
import { EngineProvisionError } from './errors.js';

const pool = (over: Partial<PoolConfigInput> = {}) =>
  PoolConfigSchema.parse({ id: 'p0', model: 'synthetic:llama', ...over });

function flagValue(flags: string[], name: string): string | undefined {
  const i = flags.indexOf(name);
  return i >= 0 ? flags[i + 1] : undefined;
}

describe('buildEngineFlags', () => {
  it('always passes model, loopback host, port, ctx, slots, metrics and no-webui', () => {
    const flags = buildEngineFlags({ pool: pool({ ctx: 1024, slots: 2 }), modelPath: '/m/model.gguf', port: 41234 });
    expect(flags).toEqual([
      '-m',
      '/m/model.gguf',
      '--host',
      '127.0.0.1',
      '--port',
      '41234',
      '-c',
      '1024',
      '-np',
      '2',
      '--metrics',
      '--no-webui',
    ]);
  });

  it('maps gpu_layers to --n-gpu-layers and threads to -t', () => {
    const flags = buildEngineFlags({ pool: pool({ gpu_layers: 'all', threads: 4 }), modelPath: '/m', port: 1 });
    expect(flagValue(flags, '--n-gpu-layers')).toBe('all');
    expect(flagValue(flags, '-t')).toBe('4');
    expect(buildEngineFlags({ pool: pool({ gpu_layers: 12 }), modelPath: '/m', port: 1 })).toContain('12');
  });

  it.each([
    [['--ngl', '33'], '33'],
    [['-ngl', '7'], '7'],
    [['--gpu-layers', 'all'], 'all'],
    [['--n-gpu-layers', '5'], '5'],
    [['--ngl=9'], '9'],
  ])('normalises %j to --n-gpu-layers', (extra, value) => {
    const flags = buildEngineFlags({
      pool: pool({ extra_flags: ['--seed', '1', ...extra, '--temp', '0'] }),
      modelPath: '/m',
      port: 1,
    });
    expect(flagValue(flags, '--n-gpu-layers')).toBe(value);
    expect(flags.filter((f) => /^-(-)?(ngl|gpu-layers)/.test(f))).toEqual([]);
    // the other extra flags pass through in order, after the managed ones
    expect(flags.slice(-4)).toEqual(['--seed', '1', '--temp', '0']);
  });

  it('applies the determinism profile: one slot and no continuous batching', () => {
    const p = pool({ determinism: true, slots: 4 });
    const flags = buildEngineFlags({ pool: p, modelPath: '/m', port: 1 });
    expect(flagValue(flags, '-np')).toBe('1');
    expect(flags).toContain('--no-cont-batching');
    expect(effectiveSlots(p)).toBe(1);
    expect(buildEngineFlags({ pool: pool(), modelPath: '/m', port: 1 })).not.toContain('--no-cont-batching');
  });

  it('embeddings and reranking pools: the engine mode, a physical batch of the context (at most 8192), pooling when set', () => {
    const embed = buildEngineFlags({
      pool: pool({ embeddings: true, ctx: 1024, pooling: 'cls' }),
      modelPath: '/m',
      port: 1,
    });
    expect(embed).toContain('--embeddings');
    expect([flagValue(embed, '-b'), flagValue(embed, '-ub'), flagValue(embed, '--pooling')]).toEqual([
      '1024',
      '1024',
      'cls',
    ]);
    const rerank = buildEngineFlags({ pool: pool({ reranking: true, ctx: 32768 }), modelPath: '/m', port: 1 });
    expect(rerank).toContain('--reranking');
    expect(flagValue(rerank, '-ub')).toBe('8192');
    expect(
      buildEngineFlags({ pool: pool(), modelPath: '/m', port: 1 }).filter((f) => /embed|rerank|pooling|^-u?b$/.test(f)),
    ).toEqual([]);
    expect(() => pool({ embeddings: true, reranking: true })).toThrow(/either embeddings or reranking/);
    expect(() => pool({ pooling: 'mean' })).toThrow(/pooling needs embeddings/);
  });

  it('rejects extra_flags that would override managed flags, naming them', () => {
    const err = (() => {
      try {
        buildEngineFlags({
          pool: pool({ extra_flags: ['--host', '0.0.0.0', '--port=9', '-c', '5'] }),
          modelPath: '/m',
          port: 1,
        });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(EngineProvisionError);
    expect((err as EngineProvisionError).code).toBe('CONFIG_INVALID');
    expect((err as Error).message).toMatch(/--host, --port, -c/);
  });

  it('rejects gpu layers set twice and a GPU-layer flag without a value', () => {
    expect(() =>
      buildEngineFlags({ pool: pool({ gpu_layers: 1, extra_flags: ['-ngl', '2'] }), modelPath: '/m', port: 1 }),
    ).toThrow(/gpu_layers/);
    expect(() => normaliseExtraFlags(['--ngl'], 'p0')).toThrow(/needs a value/);
    expect(() => normaliseExtraFlags(['--ngl', '--metrics'], 'p0')).toThrow(/needs a value/);
  });

  it('rejects an unusable port', () => {
    expect(() => buildEngineFlags({ pool: pool(), modelPath: '/m', port: 0 })).toThrow(/port/);
  });
});
