import { open } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { GgufInfoSchema } from '@llama-orch/contracts';
import type { GgufInfo } from '@llama-orch/contracts';
import { ModelProvisionError } from './errors.js';
import { GGML_TYPE_SIZES, GGUF_TYPE, ggufScalarSize } from './ggml-types.js';

/** A metadata value. Arrays are summarised (element type and length); their elements are skipped. */
export type GgufValue = number | bigint | boolean | string | { elemType: number; length: number };

export interface GgufKv {
  key: string;
  type: number;
  value: GgufValue;
  /** File offset of the record (key length) and one past its last byte: the raw record for copying. */
  start: number;
  end: number;
}

export interface GgufTensorInfo {
  name: string;
  /** Dimensions in ggml order (`ne[0]` = row length). */
  ne: number[];
  /** ggml type id. */
  type: number;
  /** Offset relative to the data section. */
  offset: number;
  /** Byte size (unpadded). */
  nbytes: number;
}

export interface GgufHeader {
  version: number;
  /** Metadata in file order. */
  kvs: GgufKv[];
  tensors: GgufTensorInfo[];
  alignment: number;
  /** Absolute file offset of the data section. */
  dataOffset: number;
  fileSize: number;
}

const CHUNK = 1 << 20;
/** Scalar strings longer than this are not decoded (real metadata strings are far smaller). */
const MAX_DECODED_STRING = 64 << 20;
const MAX_DIMS = 4;
const MAX_NAME = 64;

class Truncated extends Error {}

/** Sequential little-endian reader over a file that reads only the bytes it is asked for. */
class Cursor {
  pos = 0;
  private buf = Buffer.alloc(0);
  private bufStart = 0;
  constructor(
    private readonly fh: FileHandle,
    readonly size: number,
  ) {}

  get remaining(): number {
    return this.size - this.pos;
  }

  private async need(n: number): Promise<Buffer> {
    if (this.pos + n > this.size) throw new Truncated();
    const rel = this.pos - this.bufStart;
    if (rel < 0 || rel + n > this.buf.length) {
      const len = Math.min(Math.max(n, CHUNK), this.size - this.pos);
      const b = Buffer.alloc(len);
      let got = 0;
      while (got < len) {
        const { bytesRead } = await this.fh.read(b, got, len - got, this.pos + got);
        if (bytesRead === 0) throw new Truncated();
        got += bytesRead;
      }
      this.buf = b;
      this.bufStart = this.pos;
    }
    const off = this.pos - this.bufStart;
    this.pos += n;
    return this.buf.subarray(off, off + n);
  }

  skip(n: number): void {
    if (n < 0 || this.pos + n > this.size) throw new Truncated();
    this.pos += n;
  }

  async u32(): Promise<number> {
    return (await this.need(4)).readUInt32LE(0);
  }

  /** u64 that must fit a JS number (lengths, counts, offsets). */
  async u64(): Promise<number> {
    const v = (await this.need(8)).readBigUInt64LE(0);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Truncated();
    return Number(v);
  }

  async i64(): Promise<bigint> {
    return (await this.need(8)).readBigInt64LE(0);
  }

  async bytes(n: number): Promise<Buffer> {
    return this.need(n);
  }

  async str(): Promise<string> {
    const len = await this.u64();
    if (len > this.remaining) throw new Truncated();
    if (len > MAX_DECODED_STRING) throw new Error(`metadata string of ${len} bytes`);
    return (await this.need(len)).toString('utf8');
  }

  async skipStr(): Promise<void> {
    this.skip(await this.u64());
  }

  /**
   * Skips `count` length-prefixed strings. Lengths already in the window are read without an
   * await each: vocabularies hold 10^4–10^5 strings, and a promise per string made the header of a
   * cached model cost tens of ms on every pool start.
   */
  async skipStrs(count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      const rel = this.pos - this.bufStart;
      if (rel >= 0 && rel + 8 <= this.buf.length) {
        const hi = this.buf.readUInt32LE(rel + 4);
        // same bound as u64(): a length must be a safe integer
        if (hi > 0x1f_ffff) throw new Truncated();
        this.pos += 8;
        this.skip(hi * 2 ** 32 + this.buf.readUInt32LE(rel));
      } else {
        await this.skipStr();
      }
    }
  }
}

function bad(path: string, why: string, cause?: unknown): ModelProvisionError {
  return new ModelProvisionError(
    'INVALID_GGUF',
    `${path}: ${why}`,
    { path },
    cause === undefined ? undefined : { cause },
  );
}

function toNumberish(v: bigint): number | bigint {
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

async function readScalar(c: Cursor, type: number): Promise<GgufValue> {
  const size = ggufScalarSize(type);
  if (size === undefined) throw new Error(`invalid value type ${type}`);
  const b = await c.bytes(size);
  switch (type) {
    case GGUF_TYPE.UINT8:
      return b.readUInt8(0);
    case GGUF_TYPE.INT8:
      return b.readInt8(0);
    case GGUF_TYPE.BOOL:
      return b.readUInt8(0) !== 0;
    case GGUF_TYPE.UINT16:
      return b.readUInt16LE(0);
    case GGUF_TYPE.INT16:
      return b.readInt16LE(0);
    case GGUF_TYPE.UINT32:
      return b.readUInt32LE(0);
    case GGUF_TYPE.INT32:
      return b.readInt32LE(0);
    case GGUF_TYPE.FLOAT32:
      return b.readFloatLE(0);
    case GGUF_TYPE.UINT64:
      return toNumberish(b.readBigUInt64LE(0));
    case GGUF_TYPE.INT64:
      return toNumberish(b.readBigInt64LE(0));
    default:
      return b.readDoubleLE(0);
  }
}

async function readValue(c: Cursor, type: number): Promise<GgufValue> {
  if (type === GGUF_TYPE.STRING) return c.str();
  if (type !== GGUF_TYPE.ARRAY) return readScalar(c, type);
  const elemType = await c.u32();
  const length = await c.u64();
  if (elemType === GGUF_TYPE.STRING) {
    // every string costs at least its 8-byte length, so a bogus count fails fast here
    if (length * 8 > c.remaining) throw new Truncated();
    await c.skipStrs(length);
  } else {
    const size = ggufScalarSize(elemType);
    if (size === undefined) throw new Error(`invalid array element type ${elemType}`);
    c.skip(length * size);
  }
  return { elemType, length };
}

async function parse(c: Cursor): Promise<GgufHeader> {
  const magic = await c.bytes(4);
  if (magic.toString('latin1') !== 'GGUF')
    throw new Error(`not a GGUF file (magic ${JSON.stringify(magic.toString('latin1'))})`);
  const version = await c.u32();
  if (version !== 2 && version !== 3) throw new Error(`unsupported GGUF version ${version} (2 and 3 are read)`);
  const nTensors = await c.u64();
  const nKv = await c.u64();
  // smallest KV record: 8 (key len) + 1 (key) + 4 (type) + 1 (u8); smallest tensor info: 8+1+4+8+4+8
  if (nKv * 14 + nTensors * 33 > c.remaining) throw new Truncated();

  const kvs: GgufKv[] = [];
  const keys = new Set<string>();
  for (let i = 0; i < nKv; i++) {
    const start = c.pos;
    const key = await c.str();
    if (key === '') throw new Error(`metadata key ${i} is empty`);
    if (keys.has(key)) throw new Error(`duplicate metadata key '${key}'`);
    keys.add(key);
    const type = await c.u32();
    const value = await readValue(c, type);
    kvs.push({ key, type, value, start, end: c.pos });
  }

  let alignment = 32;
  const alignKv = kvs.find((kv) => kv.key === 'general.alignment');
  if (alignKv) {
    const a = alignKv.value;
    if (alignKv.type !== GGUF_TYPE.UINT32 || typeof a !== 'number' || a === 0 || (a & (a - 1)) !== 0) {
      throw new Error('general.alignment must be a u32 power of two');
    }
    alignment = a;
  }
  const pad = (n: number): number => Math.ceil(n / alignment) * alignment;

  const tensors: GgufTensorInfo[] = [];
  const names = new Set<string>();
  let expectedOffset = 0;
  for (let i = 0; i < nTensors; i++) {
    const name = await c.str();
    if (name === '' || Buffer.byteLength(name) >= MAX_NAME) throw new Error(`tensor ${i} has an invalid name`);
    if (names.has(name)) throw new Error(`duplicate tensor name '${name}'`);
    names.add(name);
    const nDims = await c.u32();
    if (nDims > MAX_DIMS) throw new Error(`tensor '${name}' has ${nDims} dimensions (max ${MAX_DIMS})`);
    const ne: number[] = [];
    for (let d = 0; d < nDims; d++) {
      const v = await c.i64();
      if (v < 0n || v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`tensor '${name}' has dimension ${String(v)}`);
      ne.push(Number(v));
    }
    const type = await c.u32();
    const traits = GGML_TYPE_SIZES.get(type);
    if (!traits) throw new Error(`tensor '${name}' has unsupported ggml type ${type}`);
    const [blck, typeSize] = traits;
    const row = ne[0] ?? 1;
    if (row % blck !== 0)
      throw new Error(`tensor '${name}' row of ${row} elements is not a multiple of its block size ${blck}`);
    const elements = ne.reduce((a, b) => a * b, 1);
    const nbytes = (elements / blck) * typeSize;
    const offset = await c.u64();
    // ggml requires tensors packed back to back, each padded to the alignment
    if (offset !== expectedOffset) throw new Error(`tensor '${name}' has offset ${offset}, expected ${expectedOffset}`);
    expectedOffset += pad(nbytes);
    tensors.push({ name, ne, type, offset, nbytes });
  }
  const dataOffset = nTensors > 0 ? pad(c.pos) : c.pos;
  for (const t of tensors) {
    const end = dataOffset + t.offset + t.nbytes;
    if (end > c.size) {
      throw new Error(`truncated: tensor '${t.name}' data ends at byte ${end} but the file has ${c.size} bytes`);
    }
  }
  return { version, kvs, tensors, alignment, dataOffset, fileSize: c.size };
}

/**
 * Reads and validates a GGUF header (metadata and tensor table) without reading tensor data:
 * magic, version 2/3, KV table, tensor infos (dims, types, packed offsets), and that every
 * tensor's bytes lie inside the file.
 * @throws ModelProvisionError `INVALID_GGUF` for anything that is not a complete GGUF file,
 *   `MODEL_NOT_FOUND` when the file does not exist.
 */
export async function readGgufHeader(path: string): Promise<GgufHeader> {
  let fh: FileHandle;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new ModelProvisionError('MODEL_NOT_FOUND', `model file not found: ${path}`, { path }, { cause: err });
    }
    throw bad(path, `cannot open (${(err as NodeJS.ErrnoException).code ?? String(err)})`, err);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw bad(path, 'not a regular file');
    return await parse(new Cursor(fh, st.size));
  } catch (err) {
    if (err instanceof ModelProvisionError) throw err;
    if (err instanceof Truncated) throw bad(path, 'truncated: the GGUF header ends beyond the end of the file');
    throw bad(path, err instanceof Error ? err.message : String(err), err);
  } finally {
    await fh.close();
  }
}

/** Most common type among the 2-D weights, mapped to llama.cpp's `general.file_type` for the plain cases. */
function inferFileType(h: GgufHeader): number {
  const counts = new Map<number, number>();
  for (const t of h.tensors) if (t.ne.length >= 2) counts.set(t.type, (counts.get(t.type) ?? 0) + 1);
  const top = [...counts.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
  // ggml type → llama_ftype (F32 0, F16 1, Q4_0 2, Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9, BF16 32)
  const map: Record<number, number> = { 0: 0, 1: 1, 2: 2, 3: 3, 8: 7, 6: 8, 7: 9, 30: 32 };
  return top === undefined ? 0 : (map[top] ?? 0);
}

/** Header facts as the contract's {@link GgufInfo}. */
export function ggufInfoFromHeader(h: GgufHeader, path = '<gguf>'): GgufInfo {
  const get = (key: string): GgufValue | undefined => h.kvs.find((kv) => kv.key === key)?.value;
  const arch = get('general.architecture');
  if (typeof arch !== 'string' || arch === '') throw bad(path, 'general.architecture is missing');
  const ctx = get(`${arch}.context_length`);
  const ft = get('general.file_type');
  return GgufInfoSchema.parse({
    architecture: arch,
    context_length: typeof ctx === 'number' && ctx >= 0 ? ctx : 0,
    n_params: h.tensors.reduce((sum, t) => sum + t.ne.reduce((a, b) => a * b, 1), 0),
    file_type: typeof ft === 'number' && ft >= 0 ? ft : inferFileType(h),
    tensor_count: h.tensors.length,
  });
}

/** Reads the header of a local GGUF file and returns its {@link GgufInfo}. */
export async function readGgufInfo(path: string): Promise<GgufInfo> {
  return ggufInfoFromHeader(await readGgufHeader(path), path);
}
