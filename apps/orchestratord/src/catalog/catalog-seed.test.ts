import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModelPolicySchema } from '@llama-orch/contracts';
import { systemClock } from '@llama-orch/daemon-support';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { MemoryCatalog } from '../store/memory/memory-catalog.js';
import { captureLogger } from '../testing/test-helpers.js';
import { readCatalogFile, seedCatalog, type CatalogFile } from './catalog-seed.js';

// ORCHD_CATALOG_FILE: read and validated before the start, its models registered when absent.

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const fromText = (text: string) => (): string => text;
const problemsOf = (text: string): string[] => {
  try {
    readCatalogFile('cat.yaml', fromText(text));
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe('CONFIG_INVALID');
    return [...(err as ConfigError).problems];
  }
  throw new Error('the file was accepted');
};

describe('readCatalogFile', () => {
  it("reads the dev cluster's catalog: embedder, reranker (its own ref) and coder, policy defaults filled in", () => {
    const file = readCatalogFile(join(REPO, 'requirements', 'catalog.yaml'));
    expect(
      file.registrations.map((r) => [r.ref, r.aliases, r.policy.serve, r.policy.ctx, r.policy.idle_ttl_s]),
    ).toEqual([
      ['synthetic:llama?role=embed', ['embedder'], 'embeddings', 1024, 600],
      ['synthetic:llama?role=embed&seed=2', ['reranker'], 'reranking', 1024, 600],
      ['synthetic:llama?fim=1&ctx=4096', ['coder'], 'generate', 4096, 600],
    ]);
    expect(file.registrations[0]!.policy).toEqual(
      ModelPolicySchema.parse({ serve: 'embeddings', ctx: 1024, idle_ttl_s: 600 }),
    );
    expect(file.registrations[0]!.sha256).toBeUndefined();
  });

  it('an empty list is valid', () => {
    expect(readCatalogFile('cat.yaml', fromText('models: []\n')).registrations).toEqual([]);
  });

  it('names the file and each bad entry (its index and ref) in one CONFIG_INVALID', () => {
    const problems = problemsOf(
      [
        'models:',
        '  - ref: ok',
        '  - ref: m2',
        '    serve: chat',
        '    ctx: 10',
        '  - aliases: [x]',
        '  - ref: m4',
        '    colour: blue',
      ].join('\n'),
    );
    expect(problems).toHaveLength(4);
    const prefix = 'ORCHD_CATALOG_FILE: cat.yaml: ';
    expect(problems.every((p) => p.startsWith(prefix))).toBe(true);
    const rest = problems.map((p) => p.slice(prefix.length)).sort();
    expect(rest[0]).toMatch(/^models\[1\] \(ref 'm2'\): ctx: /);
    expect(rest[1]).toMatch(/^models\[1\] \(ref 'm2'\): serve: /);
    expect(rest[2]).toMatch(/^models\[2\]: ref: /);
    expect(rest[3]).toMatch(/^models\[3\] \(ref 'm4'\): .*colour/);
  });

  it('a name two entries give is refused, naming both', () => {
    expect(
      problemsOf('models:\n  - ref: a\n    aliases: [shared]\n  - ref: b\n    aliases: [shared]\n  - ref: a\n'),
    ).toEqual([
      "ORCHD_CATALOG_FILE: cat.yaml: models[1] (ref 'b'): 'shared' is already a name of models[0] (ref 'a')",
      "ORCHD_CATALOG_FILE: cat.yaml: models[2] (ref 'a'): 'a' is already a name of models[0] (ref 'a')",
    ]);
  });

  it('an unreadable file, YAML that is not, or not a models list', () => {
    const gone = (): string => {
      throw Object.assign(new Error('no such file'), { code: 'ENOENT' });
    };
    expect(() => readCatalogFile('/nowhere/cat.yaml', gone)).toThrow(
      new ConfigError(['ORCHD_CATALOG_FILE: /nowhere/cat.yaml: cannot read it (ENOENT)']),
    );
    expect(problemsOf('models: [')[0]).toMatch(/^ORCHD_CATALOG_FILE: cat\.yaml: not valid YAML: /);
    for (const text of ['', '- ref: a\n', 'models: {ref: a}\n'])
      expect(problemsOf(text)).toEqual([
        "ORCHD_CATALOG_FILE: cat.yaml: expected a mapping with a list under 'models:'",
      ]);
    expect(problemsOf('models: []\nmodel: []\n')).toEqual([
      "ORCHD_CATALOG_FILE: cat.yaml: unknown key 'model' (only 'models:' is read)",
    ]);
  });
});

describe('seedCatalog', () => {
  const file = (text: string): CatalogFile => readCatalogFile('cat.yaml', fromText(text));
  const THREE = 'models:\n  - ref: a\n    aliases: [alpha]\n  - ref: b\n    serve: embeddings\n  - ref: c\n';

  it('registers what is absent; at the next start leaves what is there as operators changed it', async () => {
    const catalog = MemoryCatalog.inMemory(systemClock);
    const logs = captureLogger();
    expect(await seedCatalog(catalog, file(THREE), logs.logger)).toEqual({
      registered: ['a', 'b', 'c'],
      kept: [],
      conflicts: [],
    });
    expect((await catalog.get('alpha'))?.id).toBe('a');
    expect((await catalog.get('b'))?.policy.serve).toBe('embeddings');
    const summary = logs.records().find((r) => r.msg === 'catalog file');
    expect(summary).toMatchObject({ file: 'cat.yaml', registered: 3, kept: 0, conflicts: 0 });

    // an operator changes a (another alias, a pin) and deletes c through the API; then a restart
    await catalog.put({ ref: 'a', aliases: ['first'], policy: ModelPolicySchema.parse({ pin: 1 }) });
    await catalog.delete('c');
    const before = await catalog.get('a');
    expect(await seedCatalog(catalog, file(THREE), captureLogger().logger)).toEqual({
      registered: ['c'],
      kept: ['a', 'b'],
      conflicts: [],
    });
    expect(await catalog.get('a')).toEqual(before);
    expect(await catalog.get('alpha')).toBeUndefined();
  });

  it('a name another entry holds is a warning, and the others are registered', async () => {
    const catalog = MemoryCatalog.inMemory(systemClock);
    // 'alpha' is another model's alias; 'c' (a ref in the file) is an alias of 'z'
    await catalog.put({ ref: 'x', aliases: ['alpha'], policy: ModelPolicySchema.parse({}) });
    await catalog.put({ ref: 'z', aliases: ['c'], policy: ModelPolicySchema.parse({}) });
    const logs = captureLogger();
    expect(await seedCatalog(catalog, file(THREE), logs.logger)).toEqual({
      registered: ['b'],
      kept: [],
      conflicts: ['a', 'c'],
    });
    const warnings = logs.records().filter((r) => r.msg === 'catalog file: name taken');
    expect(warnings.map((w) => [w.level, w.model, w.name, w.owner])).toEqual([
      [40, 'a', 'alpha', 'x'],
      [40, 'c', 'c', 'z'],
    ]);
    expect((await catalog.get('alpha'))?.id).toBe('x');
    expect((await catalog.get('c'))?.id).toBe('z');
    expect(await catalog.get('a')).toBeUndefined();
  });

  it('a store that fails rejects (the start fails)', async () => {
    const catalog = MemoryCatalog.inMemory(systemClock);
    catalog.get = () => Promise.reject(new Error('store down'));
    await expect(seedCatalog(catalog, file(THREE), captureLogger().logger)).rejects.toThrow('store down');
  });
});
