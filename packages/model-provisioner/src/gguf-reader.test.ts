import { copyFile, open, readFile, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ModelProvisionError,
  parseSyntheticParams,
  readGgufHeader,
  readGgufInfo,
  writeSyntheticModel,
} from './index.js';
import { TempDirs, testVocabPath } from './test-helpers.js';

const temp = new TempDirs();
let dir: string;
let vocab: string;
let model: string;

beforeAll(async () => {
  dir = await temp.make();
  vocab = await testVocabPath();
  model = join(dir, 'tiny.gguf');
  await writeSyntheticModel(parseSyntheticParams(''), model, vocab);
});
afterAll(() => temp.cleanup());

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ModelProvisionError);
  return (err as ModelProvisionError).code;
}

describe('GGUF header reader', () => {
  it('reads the vocab-only file of the llama.cpp tree', async () => {
    const info = await readGgufInfo(vocab);
    expect(info).toEqual({ architecture: 'llama', context_length: 4096, n_params: 0, file_type: 1, tensor_count: 0 });
    const h = await readGgufHeader(vocab);
    expect(h.version).toBe(3);
    expect(h.kvs.find((kv) => kv.key === 'tokenizer.ggml.tokens')?.value).toEqual({ elemType: 8, length: 32000 });
  });

  it('reads a model: tensors, packed offsets, parameter count', async () => {
    const h = await readGgufHeader(model);
    expect(h.tensors).toHaveLength(20);
    expect(h.tensors[0]).toMatchObject({
      name: 'token_embd.weight',
      ne: [64, 32000],
      type: 0,
      offset: 0,
      nbytes: 64 * 32000 * 4,
    });
    expect(h.dataOffset % 32).toBe(0);
    const last = h.tensors[h.tensors.length - 1]!;
    expect(h.dataOffset + last.offset + last.nbytes).toBe(h.fileSize);
    const info = await readGgufInfo(model);
    expect(info.n_params).toBe(64 * 32000 + 64 + 2 * (64 + 4 * 64 * 64 + 64 + 3 * 64 * 128));
  });

  it('refuses a file that is not GGUF', async () => {
    const p = join(dir, 'not.gguf');
    await writeFile(p, 'this is plain text, long enough to read a header from, but not a model at all\n');
    expect(await codeOf(readGgufInfo(p))).toBe('INVALID_GGUF');
    await expect(readGgufInfo(p)).rejects.toThrow(/not a GGUF file/);
  });

  it('refuses an empty file and one cut inside the header', async () => {
    const empty = join(dir, 'empty.gguf');
    await writeFile(empty, '');
    expect(await codeOf(readGgufInfo(empty))).toBe('INVALID_GGUF');
    const cut = join(dir, 'cut-header.gguf');
    await copyFile(model, cut);
    await truncate(cut, 300_000); // inside the tokenizer arrays
    await expect(readGgufInfo(cut)).rejects.toThrow(/truncated/);
    expect(await codeOf(readGgufInfo(cut))).toBe('INVALID_GGUF');
  });

  it('refuses a file whose tensor data ends beyond its end', async () => {
    const cut = join(dir, 'cut-data.gguf');
    await copyFile(model, cut);
    const h = await readGgufHeader(model);
    await truncate(cut, h.fileSize - 1000);
    await expect(readGgufInfo(cut)).rejects.toThrow(/truncated: tensor '.*' data ends at byte/);
  });

  it('refuses unsupported versions and broken tensor tables', async () => {
    const v1 = join(dir, 'v1.gguf');
    const bytes = await readFile(model);
    const b = Buffer.from(bytes);
    b.writeUInt32LE(1, 4);
    await writeFile(v1, b);
    await expect(readGgufInfo(v1)).rejects.toThrow(/unsupported GGUF version 1/);

    // move the second tensor's offset: ggml requires packed offsets
    const h = await readGgufHeader(model);
    const name = Buffer.from('output_norm.weight');
    const at = bytes.indexOf(name, h.kvs[h.kvs.length - 1]!.end);
    const offsetPos = at + name.length + 4 + 8 + 4;
    const bad = join(dir, 'bad-offset.gguf');
    await copyFile(model, bad);
    const fh = await open(bad, 'r+');
    const off = Buffer.alloc(8);
    off.writeBigUInt64LE(12345n);
    await fh.write(off, 0, 8, offsetPos);
    await fh.close();
    await expect(readGgufInfo(bad)).rejects.toThrow(/tensor 'output_norm.weight' has offset 12345/);
  });

  it('reports a missing file as MODEL_NOT_FOUND', async () => {
    expect(await codeOf(readGgufInfo(join(dir, 'nope.gguf')))).toBe('MODEL_NOT_FOUND');
  });
});
