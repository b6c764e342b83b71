import { createHash, randomBytes } from 'node:crypto';
import { open, readFile, rename, rm } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { ModelProvisionError, cacheError } from './errors.js';
import { GGML_TYPE_F16, GGML_TYPE_F32, GGUF_TYPE } from './ggml-types.js';
import { readGgufHeader } from './gguf-reader.js';
import { GaussianStream, f32ToF16Bits } from './prng.js';
import type { SyntheticLlamaParams } from './synthetic-params.js';

/** Tokenizer file in the llama.cpp tree whose `tokenizer.*` metadata the generator copies. */
export const SYNTHETIC_VOCAB_FILE = 'models/ggml-vocab-llama-spm.gguf';

const ALIGN = 32;
const WEIGHT_STD = 0.02;
/** Generated models above this size are refused: they are for tests and demos. */
const MAX_SYNTHETIC_BYTES = 2 * 1024 ** 3;
/** Elements generated per write, so large tensors never sit in memory whole. */
const CHUNK_ELEMENTS = 1 << 18;

interface TensorPlan {
  name: string;
  ne: number[];
  type: number;
  /** `ones` for norm weights, else N(0, std). */
  init: 'ones' | 'normal';
  nbytes: number;
  offset: number;
}

export interface SyntheticModelResult {
  sha256: string;
  size_bytes: number;
  n_vocab: number;
}

class HeaderBuilder {
  private readonly parts: Buffer[] = [];
  length = 0;
  push(b: Buffer): void {
    this.parts.push(b);
    this.length += b.length;
  }
  u32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.push(b);
  }
  u64(v: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  f32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.push(b);
  }
  str(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.push(b);
  }
  kvU32(key: string, v: number): void {
    this.str(key);
    this.u32(GGUF_TYPE.UINT32);
    this.u32(v);
  }
  kvF32(key: string, v: number): void {
    this.str(key);
    this.u32(GGUF_TYPE.FLOAT32);
    this.f32(v);
  }
  kvStr(key: string, v: string): void {
    this.str(key);
    this.u32(GGUF_TYPE.STRING);
    this.str(v);
  }
  pad(align: number): void {
    const rem = this.length % align;
    if (rem !== 0) this.push(Buffer.alloc(align - rem));
  }
  build(): Buffer {
    return Buffer.concat(this.parts);
  }
}

function planTensors(p: SyntheticLlamaParams, nVocab: number): TensorPlan[] {
  const wtype = p.type === 'f16' ? GGML_TYPE_F16 : GGML_TYPE_F32;
  // head_count_kv = head_count, so the K/V projections are square like Q
  const nEmbdKv = p.embd;
  const list: Omit<TensorPlan, 'nbytes' | 'offset'>[] = [
    { name: 'token_embd.weight', ne: [p.embd, nVocab], type: wtype, init: 'normal' },
    { name: 'output_norm.weight', ne: [p.embd], type: GGML_TYPE_F32, init: 'ones' },
  ];
  for (let i = 0; i < p.layers; i++) {
    list.push(
      { name: `blk.${i}.attn_norm.weight`, ne: [p.embd], type: GGML_TYPE_F32, init: 'ones' },
      { name: `blk.${i}.attn_q.weight`, ne: [p.embd, p.embd], type: wtype, init: 'normal' },
      { name: `blk.${i}.attn_k.weight`, ne: [p.embd, nEmbdKv], type: wtype, init: 'normal' },
      { name: `blk.${i}.attn_v.weight`, ne: [p.embd, nEmbdKv], type: wtype, init: 'normal' },
      { name: `blk.${i}.attn_output.weight`, ne: [p.embd, p.embd], type: wtype, init: 'normal' },
      { name: `blk.${i}.ffn_norm.weight`, ne: [p.embd], type: GGML_TYPE_F32, init: 'ones' },
      { name: `blk.${i}.ffn_gate.weight`, ne: [p.embd, p.ff], type: wtype, init: 'normal' },
      { name: `blk.${i}.ffn_up.weight`, ne: [p.embd, p.ff], type: wtype, init: 'normal' },
      { name: `blk.${i}.ffn_down.weight`, ne: [p.ff, p.embd], type: wtype, init: 'normal' },
    );
  }
  let off = 0;
  return list.map((t) => {
    const nbytes = t.ne.reduce((a, b) => a * b, 1) * (t.type === GGML_TYPE_F16 ? 2 : 4);
    const plan = { ...t, nbytes, offset: off };
    off += Math.ceil(nbytes / ALIGN) * ALIGN;
    return plan;
  });
}

async function loadTokenizer(vocabPath: string): Promise<{ raw: Buffer[]; nVocab: number }> {
  const header = await readGgufHeader(vocabPath);
  const tokens = header.kvs.find((kv) => kv.key === 'tokenizer.ggml.tokens')?.value;
  if (typeof tokens !== 'object' || tokens.elemType !== GGUF_TYPE.STRING || tokens.length === 0) {
    throw new ModelProvisionError('INVALID_GGUF', `${vocabPath}: no tokenizer.ggml.tokens string array`, { path: vocabPath });
  }
  const bytes = await readFile(vocabPath);
  // copied byte for byte: no re-encoding of tens of thousands of strings, nothing to get wrong
  const raw = header.kvs.filter((kv) => kv.key.startsWith('tokenizer.')).map((kv) => bytes.subarray(kv.start, kv.end));
  return { raw, nVocab: tokens.length };
}

async function writeAll(fh: FileHandle, hash: ReturnType<typeof createHash>, b: Buffer): Promise<void> {
  hash.update(b);
  let done = 0;
  while (done < b.length) {
    const { bytesWritten } = await fh.write(b, done, b.length - done);
    done += bytesWritten;
  }
}

async function writeTensor(fh: FileHandle, hash: ReturnType<typeof createHash>, t: TensorPlan, seed: number): Promise<void> {
  const total = t.ne.reduce((a, b) => a * b, 1);
  const gauss = t.init === 'normal' ? new GaussianStream(GaussianStream.seedFor(seed, t.name), WEIGHT_STD) : undefined;
  const values = new Float32Array(Math.min(total, CHUNK_ELEMENTS));
  for (let done = 0; done < total; done += values.length) {
    const n = Math.min(values.length, total - done);
    const chunk = values.subarray(0, n);
    if (gauss) gauss.fill(chunk);
    else chunk.fill(1);
    let out: Buffer;
    if (t.type === GGML_TYPE_F16) {
      out = Buffer.alloc(n * 2);
      for (let i = 0; i < n; i++) out.writeUInt16LE(f32ToF16Bits(chunk[i] ?? 0), i * 2);
    } else {
      out = Buffer.from(chunk.buffer, chunk.byteOffset, n * 4);
      // Float32Array is host-endian; GGUF is little-endian
      if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) out = Buffer.from(out).swap32();
    }
    await writeAll(fh, hash, out);
  }
  const pad = Math.ceil(t.nbytes / ALIGN) * ALIGN - t.nbytes;
  if (pad > 0) await writeAll(fh, hash, Buffer.alloc(pad));
}

/**
 * Writes a llama-architecture GGUF with seeded random weights (xoshiro128** + Box–Muller, one
 * stream per tensor, std 0.02, norm weights 1.0) and the tokenizer of `vocabPath` (every
 * `tokenizer.*` record copied verbatim). Same parameters and vocab ⇒ byte-identical file. The
 * model's text is noise: it exists so the real engine can load and run something without
 * downloads. Written to a temp file and renamed onto `outPath`.
 */
export async function writeSyntheticModel(
  params: SyntheticLlamaParams,
  outPath: string,
  vocabPath: string,
  opts: { signal?: AbortSignal } = {},
): Promise<SyntheticModelResult> {
  const { raw, nVocab } = await loadTokenizer(vocabPath);
  const tensors = planTensors(params, nVocab);
  const last = tensors[tensors.length - 1];
  const dataSize = last ? last.offset + Math.ceil(last.nbytes / ALIGN) * ALIGN : 0;

  const h = new HeaderBuilder();
  const nKv = 13 + raw.length;
  h.push(Buffer.from('GGUF', 'latin1'));
  h.u32(3);
  h.u64(tensors.length);
  h.u64(nKv);
  h.kvStr('general.architecture', 'llama');
  h.kvStr('general.name', `synthetic-llama-${params.layers}l-${params.embd}e-seed${params.seed}`);
  h.kvU32('general.file_type', params.type === 'f16' ? 1 : 0);
  h.kvU32('llama.vocab_size', nVocab);
  h.kvU32('llama.context_length', params.ctx);
  h.kvU32('llama.embedding_length', params.embd);
  h.kvU32('llama.block_count', params.layers);
  h.kvU32('llama.feed_forward_length', params.ff);
  h.kvU32('llama.attention.head_count', params.heads);
  h.kvU32('llama.attention.head_count_kv', params.heads);
  // llama.cpp refuses n_rot != head size for llama
  h.kvU32('llama.rope.dimension_count', params.embd / params.heads);
  h.kvF32('llama.rope.freq_base', 10000);
  h.kvF32('llama.attention.layer_norm_rms_epsilon', 1e-5);
  for (const kv of raw) h.push(kv);
  for (const t of tensors) {
    h.str(t.name);
    h.u32(t.ne.length);
    for (const d of t.ne) h.u64(d);
    h.u32(t.type);
    h.u64(t.offset);
  }
  h.pad(ALIGN);
  const header = h.build();
  const size = header.length + dataSize;
  if (size > MAX_SYNTHETIC_BYTES) {
    throw new ModelProvisionError('INVALID_MODEL_REF', `synthetic model would be ${size} bytes (max ${MAX_SYNTHETIC_BYTES}); choose smaller parameters`, { size });
  }

  const tmp = `${outPath}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  const hash = createHash('sha256');
  let fh: FileHandle | undefined;
  try {
    fh = await open(tmp, 'wx').catch((err: unknown) => { throw cacheError(err, tmp); });
    await writeAll(fh, hash, header);
    for (const t of tensors) {
      opts.signal?.throwIfAborted();
      await writeTensor(fh, hash, t, params.seed);
    }
    await fh.sync();
    await fh.close();
    fh = undefined;
    await rename(tmp, outPath);
  } catch (err) {
    await fh?.close().catch(() => undefined);
    await rm(tmp, { force: true });
    throw cacheError(err, outPath);
  }
  return { sha256: hash.digest('hex'), size_bytes: size, n_vocab: nVocab };
}
