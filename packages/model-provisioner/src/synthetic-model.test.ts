import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ModelProvisionError,
  ModelProvisioner,
  ModelStore,
  SYNTHETIC_CHAT_TEMPLATE,
  SYNTHETIC_TOOL_USE_TEMPLATE,
  parseSyntheticParams,
  readGgufHeader,
  readGgufInfo,
  writeSyntheticModel,
} from './index.js';
import { TempDirs, testLogger, testVocabPath } from './test-helpers.js';

const temp = new TempDirs();
let dir: string;
let vocab: string;
beforeAll(async () => {
  dir = await temp.make();
  vocab = await testVocabPath();
});
afterAll(() => temp.cleanup());

const sha = async (p: string): Promise<string> =>
  createHash('sha256')
    .update(await readFile(p))
    .digest('hex');

describe('synthetic llama generator', () => {
  it('writes byte-identical files for the same parameters and different ones for another seed', async () => {
    const a = join(dir, 'a.gguf');
    const b = join(dir, 'b.gguf');
    const c = join(dir, 'c.gguf');
    const ra = await writeSyntheticModel(parseSyntheticParams(''), a, vocab);
    const rb = await writeSyntheticModel(parseSyntheticParams('seed=42'), b, vocab);
    const rc = await writeSyntheticModel(parseSyntheticParams('seed=43'), c, vocab);
    expect(await sha(a)).toBe(await sha(b));
    expect(ra.sha256).toBe(await sha(a));
    expect(rb.sha256).toBe(ra.sha256);
    expect(rc.sha256).not.toBe(ra.sha256);
    expect(ra.size_bytes).toBe((await readFile(a)).length);
  });

  it('an embedding model is non-causal with mean pooling; a FIM model names its fill-in-the-middle tokens; the default has neither', async () => {
    const keysOf = async (query: string): Promise<Map<string, unknown>> => {
      const p = join(dir, `${query.replace(/[^a-z0-9]/g, '_')}.gguf`);
      await writeSyntheticModel(parseSyntheticParams(query), p, vocab);
      return new Map((await readGgufHeader(p)).kvs.map((kv) => [kv.key, kv.value]));
    };
    const embed = await keysOf('role=embed');
    expect(embed.get('llama.attention.causal')).toBe(false);
    expect(embed.get('llama.pooling_type')).toBe(1);
    const fim = await keysOf('fim=1');
    expect([
      fim.get('tokenizer.ggml.fim_pre_token_id'),
      fim.get('tokenizer.ggml.fim_suf_token_id'),
      fim.get('tokenizer.ggml.fim_mid_token_id'),
    ]).toEqual([3, 4, 5]);
    const plain = await keysOf('');
    expect([...plain.keys()].filter((k) => k.includes('pooling') || k.includes('causal') || k.includes('fim'))).toEqual(
      [],
    );
  });

  it('is read back as a 2-layer llama with context 256 and 20 tensors', async () => {
    const p = join(dir, 'default.gguf');
    await writeSyntheticModel(parseSyntheticParams(''), p, vocab);
    expect(await readGgufInfo(p)).toEqual({
      architecture: 'llama',
      context_length: 256,
      n_params: 2_130_240,
      file_type: 0,
      tensor_count: 20,
    });
    const h = await readGgufHeader(p);
    const get = (k: string): unknown => h.kvs.find((kv) => kv.key === k)?.value;
    expect(get('llama.block_count')).toBe(2);
    expect(get('llama.embedding_length')).toBe(64);
    expect(get('llama.attention.head_count')).toBe(4);
    expect(get('llama.feed_forward_length')).toBe(128);
    expect(get('llama.rope.dimension_count')).toBe(16);
    expect(get('llama.vocab_size')).toBe(32000);
    // norm weights are exactly 1.0 and stay F32
    const norm = h.tensors.find((t) => t.name === 'output_norm.weight')!;
    expect(norm.type).toBe(0);
    const bytes = await readFile(p);
    const normValues = new Float32Array(
      bytes.buffer.slice(
        bytes.byteOffset + h.dataOffset + norm.offset,
        bytes.byteOffset + h.dataOffset + norm.offset + norm.nbytes,
      ),
    );
    expect([...normValues].every((v) => v === 1)).toBe(true);
    // random weights have roughly the configured spread
    const emb = h.tensors[0]!;
    const w = new Float32Array(
      bytes.buffer.slice(
        bytes.byteOffset + h.dataOffset + emb.offset,
        bytes.byteOffset + h.dataOffset + emb.offset + emb.nbytes,
      ),
    );
    const mean = w.reduce((s, v) => s + v, 0) / w.length;
    const std = Math.sqrt(w.reduce((s, v) => s + (v - mean) ** 2, 0) / w.length);
    expect(Math.abs(mean)).toBeLessThan(0.001);
    expect(std).toBeGreaterThan(0.019);
    expect(std).toBeLessThan(0.021);
  });

  it('copies every tokenizer.* record of the vocab file byte for byte, then adds its chat templates', async () => {
    const p = join(dir, 'tok.gguf');
    await writeSyntheticModel(parseSyntheticParams(''), p, vocab);
    const [vh, mh] = await Promise.all([readGgufHeader(vocab), readGgufHeader(p)]);
    const [vb, mb] = await Promise.all([readFile(vocab), readFile(p)]);
    const vTok = vh.kvs.filter((kv) => kv.key.startsWith('tokenizer.'));
    const mTok = mh.kvs.filter((kv) => kv.key.startsWith('tokenizer.'));
    // The vocab file has no template of its own; the generator's is the only one.
    expect(vTok.map((kv) => kv.key)).not.toContain('tokenizer.chat_template');
    expect(mTok.map((kv) => kv.key)).toEqual([
      ...vTok.map((kv) => kv.key),
      'tokenizer.chat_template',
      'tokenizer.chat_template.tool_use',
    ]);
    expect(mTok.at(-2)?.value).toBe(SYNTHETIC_CHAT_TEMPLATE);
    expect(mTok.at(-1)?.value).toBe(SYNTHETIC_TOOL_USE_TEMPLATE);
    expect(vTok.length).toBeGreaterThanOrEqual(10);
    for (const [i, kv] of vTok.entries()) {
      const m = mTok[i]!;
      expect(mb.subarray(m.start, m.end).equals(vb.subarray(kv.start, kv.end))).toBe(true);
    }
  });

  it('writes F16 weights on request (half the size of the big tensors)', async () => {
    const p = join(dir, 'f16.gguf');
    const r = await writeSyntheticModel(parseSyntheticParams('type=f16'), p, vocab);
    const info = await readGgufInfo(p);
    expect(info.file_type).toBe(1);
    const h = await readGgufHeader(p);
    expect(h.tensors.find((t) => t.name === 'token_embd.weight')?.type).toBe(1);
    expect(h.tensors.find((t) => t.name === 'blk.0.attn_norm.weight')?.type).toBe(0);
    expect(r.size_bytes).toBeLessThan(5_100_000);
  });

  it('has 2 + 9 tensors per layer', async () => {
    const p = join(dir, 'l3.gguf');
    await writeSyntheticModel(parseSyntheticParams('layers=3&embd=32&heads=2&ff=48&ctx=64'), p, vocab);
    expect(await readGgufInfo(p)).toMatchObject({ tensor_count: 29, context_length: 64 });
  });
});

describe('ensure(synthetic:…)', () => {
  it('generates once into the content-addressed store; equal refs share id and file', async () => {
    const cacheDir = await temp.make();
    const p = new ModelProvisioner({ cacheDir, logger: testLogger(), vocabPath: vocab, progressTty: false });
    try {
      const [a, b] = await Promise.all([p.ensure('synthetic:llama'), p.ensure('synthetic:llama?seed=42')]);
      expect(a.id).toBe(b.id);
      expect(a.local_path).toBe(b.local_path);
      expect(a.local_path).toBe(join(cacheDir, 'models', 'sha256', `${a.sha256}.gguf`));
      expect(a).toMatchObject({
        ref: 'synthetic:llama',
        source: 'synthetic',
        gguf: { architecture: 'llama', context_length: 256, tensor_count: 20 },
      });
      expect(await sha(a.local_path)).toBe(a.sha256);
      const again = await p.ensure('synthetic:llama', { sha256: a.sha256 });
      expect(again.local_path).toBe(a.local_path);
      const err = await p.ensure('synthetic:llama?seed=1', { sha256: a.sha256 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ModelProvisionError);
      expect((err as ModelProvisionError).code).toBe('DIGEST_MISMATCH');
      const entries = await p.catalog.list();
      expect(entries.map((e) => e.id)).toEqual([a.id]);
      expect(entries[0]?.provenance.detail).toMatch(/noise/);
    } finally {
      await p.close();
    }
  });

  it('never reuses a file an older generator wrote for the same ref (no chat template)', async () => {
    const cacheDir = await temp.make();
    const p = new ModelProvisioner({ cacheDir, logger: testLogger(), vocabPath: vocab, progressTty: false });
    try {
      // What generator 1 left behind: the ref recorded under the canonical ref alone, pointing at a
      // stored blob of other bytes (the seed-7 model stands in for the old, template-less file).
      const old = await p.ensure('synthetic:llama?seed=7');
      const canonical = 'synthetic:llama?layers=2&embd=64&heads=4&ff=128&ctx=256&seed=42&type=f32';
      await mkdir(join(cacheDir, 'models', 'refs'), { recursive: true });
      await writeFile(
        join(cacheDir, 'models', 'refs', `${ModelStore.keyOf(canonical)}.json`),
        JSON.stringify({
          ref: canonical,
          sha256: old.sha256,
          size_bytes: old.size_bytes,
          updated_at: new Date().toISOString(),
        }),
      );
      const fresh = await p.ensure('synthetic:llama');
      expect(fresh.sha256).not.toBe(old.sha256);
      const h = await readGgufHeader(fresh.local_path);
      expect(h.kvs.find((kv) => kv.key === 'tokenizer.chat_template')?.value).toBe(SYNTHETIC_CHAT_TEMPLATE);
    } finally {
      await p.close();
    }
  });

  it('reports an unusable cache directory as CACHE_UNWRITABLE', async () => {
    const file = join(await temp.make(), 'a-file');
    await writeFile(file, 'x');
    const p = new ModelProvisioner({
      cacheDir: join(file, 'cache'),
      logger: testLogger(),
      vocabPath: vocab,
      progressTty: false,
    });
    await expect(p.ensure('synthetic:llama')).rejects.toMatchObject({ code: 'CACHE_UNWRITABLE' });
    await p.close();
  });

  it('refuses unknown parameters', async () => {
    const p = new ModelProvisioner({
      cacheDir: await temp.make(),
      logger: testLogger(),
      vocabPath: vocab,
      progressTty: false,
    });
    await expect(p.ensure('synthetic:llama?lyers=2')).rejects.toMatchObject({ code: 'INVALID_MODEL_REF' });
    await p.close();
    await expect(p.ensure('synthetic:llama')).rejects.toMatchObject({ code: 'PROVISIONER_CLOSED' });
  });
});
