import { describe, expect, it } from 'vitest';
import { MODEL_REF_GRAMMAR, ModelProvisionError, isSafeModelId, parseModelRef } from './index.js';

const BASE = '/etc/llorch';

describe('model ref grammar', () => {
  it.each([
    [
      'hf:TheBloke/Llama-2-7B-GGUF/llama-2-7b.Q4_K_M.gguf',
      { kind: 'hf', org: 'TheBloke', repo: 'Llama-2-7B-GGUF', path: 'llama-2-7b.Q4_K_M.gguf' },
    ],
    [
      'hf:org/repo/sub/dir/model.gguf',
      { kind: 'hf', path: 'sub/dir/model.gguf', canonical: 'hf:org/repo/sub/dir/model.gguf' },
    ],
    ['hf:/org/repo/m.GGUF', { kind: 'hf', canonical: 'hf:org/repo/m.GGUF' }],
    ['https://example.com/models/tiny.gguf', { kind: 'url', url: 'https://example.com/models/tiny.gguf' }],
    ['https://example.com/m.gguf#frag', { kind: 'url', url: 'https://example.com/m.gguf' }],
    ['/models/a.gguf', { kind: 'file', path: '/models/a.gguf', canonical: 'file:/models/a.gguf' }],
    ['./a.gguf', { kind: 'file', path: '/etc/llorch/a.gguf' }],
    ['../models/a.gguf', { kind: 'file', path: '/etc/models/a.gguf' }],
    ['models/a.gguf', { kind: 'file', path: '/etc/llorch/models/a.gguf' }],
    ['file:/models/a.gguf', { kind: 'file', path: '/models/a.gguf' }],
    ['file:rel/a.gguf', { kind: 'file', path: '/etc/llorch/rel/a.gguf' }],
    ['file:///models/a%20b.gguf', { kind: 'file', path: '/models/a b.gguf' }],
    [
      'synthetic:llama',
      { kind: 'synthetic', canonical: 'synthetic:llama?layers=2&embd=64&heads=4&ff=128&ctx=256&seed=42&type=f32' },
    ],
    // Later parameters appear only when not default, so refs made before them keep their ids.
    [
      'synthetic:llama?fim=1&role=embed',
      {
        kind: 'synthetic',
        canonical: 'synthetic:llama?layers=2&embd=64&heads=4&ff=128&ctx=256&seed=42&type=f32&role=embed&fim=1',
      },
    ],
    [
      'synthetic:llama?role=chat&fim=0',
      { kind: 'synthetic', canonical: 'synthetic:llama?layers=2&embd=64&heads=4&ff=128&ctx=256&seed=42&type=f32' },
    ],
    [
      'synthetic:llama?seed=7&type=f16',
      { kind: 'synthetic', params: { layers: 2, embd: 64, heads: 4, ff: 128, ctx: 256, seed: 7, type: 'f16' } },
    ],
    [
      'synthetic:llama?layers=1&embd=32&heads=2&ff=64&ctx=128',
      { kind: 'synthetic', params: { layers: 1, embd: 32, heads: 2, ff: 64, ctx: 128, seed: 42, type: 'f32' } },
    ],
  ])('accepts %s', (ref, expected) => {
    const parsed = parseModelRef(ref, BASE);
    expect(parsed).toMatchObject(expected);
    expect(isSafeModelId(parsed.id)).toBe(true);
  });

  it.each([
    ['', 'empty'],
    ['  hf:a/b/c.gguf', 'whitespace'],
    ['hf:org', 'hf: needs'],
    ['hf:org/repo', 'whole repository'],
    ['hf:org/repo/model.bin', '.gguf'],
    ['hf:org/repo/../../etc/passwd.gguf', 'bad path segment'],
    ['hf:org/repo/a//b.gguf', 'bad path segment'],
    ['hf:../repo/a.gguf', 'org and repo'],
    ['hf:org/re po/a.gguf', 'org and repo'],
    ['http://example.com/a.gguf', 'http:// is refused'],
    ['https://user:pw@example.com/a.gguf', 'credentials'],
    ['https://', 'not a valid URL'],
    ['s3://bucket/key.gguf', "unsupported scheme 's3:'"],
    ['oci://registry/repo:tag', "unsupported scheme 'oci:'"],
    ['repo:thing', "unsupported scheme 'repo:'"],
    ['file:', 'empty path'],
    ['~/models/a.gguf', '~ is not expanded'],
    ['synthetic:mistral', 'only synthetic architecture'],
    ['synthetic:llama?foo=1', "unknown parameter 'foo'"],
    ['synthetic:llama?seed=1&seed=2', 'given twice'],
    ['synthetic:llama?layers=0', 'layers must be in'],
    ['synthetic:llama?layers=two', 'non-negative integer'],
    ['synthetic:llama?type=q4', 'type must be f32 or f16'],
    ['synthetic:llama?embd=66&heads=4', 'multiple of heads'],
    ['synthetic:llama?embd=12&heads=4', 'must be even'],
    ['synthetic:llama?seed', 'not name=value'],
    ['synthetic:llama?role=rerank', 'role must be chat or embed'],
    ['synthetic:llama?fim=yes', 'fim must be 0 or 1'],
  ])('rejects %s (%s)', (ref, why) => {
    let err: unknown;
    try {
      parseModelRef(ref, BASE);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ModelProvisionError);
    expect((err as ModelProvisionError).code).toBe('INVALID_MODEL_REF');
    expect((err as Error).message).toContain(why);
    if (!ref.startsWith('synthetic:llama?')) expect((err as Error).message).toContain(MODEL_REF_GRAMMAR);
  });

  it('accepts http:// only when insecure http is allowed', () => {
    expect(parseModelRef('http://127.0.0.1:9/a.gguf', undefined, { allowInsecureHttp: true })).toMatchObject({
      kind: 'url',
    });
  });

  it('resolves relative paths against baseDir, never the CWD, and refuses them without one', () => {
    expect(parseModelRef('m.gguf', '/srv/cfg')).toMatchObject({ path: '/srv/cfg/m.gguf' });
    expect(() => parseModelRef('m.gguf')).toThrow(/needs a base directory/);
    expect(parseModelRef('/abs/m.gguf')).toMatchObject({ path: '/abs/m.gguf' });
  });

  it('gives equal canonical refs the same id and different models different ids', () => {
    const a = parseModelRef('synthetic:llama');
    expect(parseModelRef('synthetic:llama?seed=42').id).toBe(a.id);
    expect(parseModelRef('synthetic:llama?type=f32&seed=42&layers=2').id).toBe(a.id);
    expect(parseModelRef('synthetic:llama?seed=43').id).not.toBe(a.id);
    expect(parseModelRef('./x/../m.gguf', '/d').id).toBe(parseModelRef('file:/d/m.gguf').id);
    expect(a.id).toMatch(/^synthetic-llama-[0-9a-f]{12}$/);
    expect(parseModelRef('hf:org/repo/Llama 3.gguf').id).toMatch(/^llama-3-[0-9a-f]{12}$/);
  });

  it('never lets an id escape a directory', () => {
    for (const id of ['../x', 'a/b', '.hidden', 'a..b', 'UPPER', '']) expect(isSafeModelId(id)).toBe(false);
  });
});
