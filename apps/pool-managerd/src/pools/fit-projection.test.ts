import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PoolConfigSchema, type PoolConfig, type PoolConfigInput } from '@llama-orch/contracts';
import {
  ensureCpuTestEngine,
  testCacheDir,
  type MemoryProjection as ToolProjection,
} from '@llama-orch/engine-provisioner';
import { ModelProvisioner, readGgufHeader } from '@llama-orch/model-provisioner';
import { FIT_FLAGS, fitParamsArgs, fromFitParams, projectWithFitParams } from './fit-projection.js';
import { FIT_ENGINE_BASE_BYTES, memoryFactsOf, projectMemory, type ModelMemoryFacts } from './memory-projection.js';
import { PoolMemory } from './pool-memory.js';
import { PoolTable } from './pool-table.js';

const MiB = 1024 * 1024;
const run = promisify(execFile);

const pool = (p: Partial<PoolConfigInput> = {}): PoolConfig =>
  PoolConfigSchema.parse({ id: 'p', model: 'synthetic:llama', ctx: 1024, slots: 1, ...p });

const host = (model: number, context: number, compute: number): ToolProjection['host'] => ({
  model_mib: model,
  context_mib: context,
  compute_mib: compute,
  total_mib: model + context + compute,
});

/** A synthetic llama's facts: 32k vocabulary, KV heads = heads. */
const facts = (embd: number, ff: number, layers: number): ModelMemoryFacts => ({
  file_bytes: 9 * MiB,
  n_layer: layers,
  n_embd: embd,
  n_ff: ff,
  n_vocab: 32_000,
  n_embd_k_gqa: embd,
  n_embd_v_gqa: embd,
});

describe("fitParamsArgs: the engine's memory-relevant flags, as llama-fit-params takes them", () => {
  it('a generation pool passes nothing: llama.cpp defaults, -b 2048 -ub 512', () => {
    expect(fitParamsArgs(pool())).toEqual({ extraArgs: [], batch: 2048, ubatch: 512 });
    // --no-cont-batching and -t are the server's (or change no memory).
    expect(fitParamsArgs(pool({ determinism: true, threads: 2 }))).toEqual({ extraArgs: [], batch: 2048, ubatch: 512 });
  });

  it('embedding and reranking pools pass the batch the engine gets (the context, at most 8192), not --embeddings', () => {
    expect(fitParamsArgs(pool({ embeddings: true, pooling: 'mean' }))).toEqual({
      extraArgs: ['-b', '1024', '-ub', '1024'],
      batch: 1024,
      ubatch: 1024,
    });
    expect(fitParamsArgs(pool({ reranking: true, ctx: 16_384 })).extraArgs).toEqual(['-b', '8192', '-ub', '8192']);
  });

  it('GPU layers and memory-relevant extra_flags pass (inline values split); the rest, with their values, do not', () => {
    const args = fitParamsArgs(
      pool({
        gpu_layers: 'all',
        extra_flags: [
          '--alias',
          'x',
          '-fa',
          'on',
          '--cache-type-k=q8_0',
          '--seed',
          '-1',
          '-nkvo',
          '--jinja',
          '-ub',
          '256',
        ],
      }),
    );
    expect(args).toEqual({
      extraArgs: ['--n-gpu-layers', 'all', '-fa', 'on', '--cache-type-k', 'q8_0', '-nkvo', '-ub', '256'],
      batch: 2048,
      ubatch: 256,
    });
    expect(fitParamsArgs(pool({ extra_flags: ['-ngl', '12', '--batch-size', '4096'] }))).toEqual({
      extraArgs: ['--n-gpu-layers', '12', '--batch-size', '4096'],
      batch: 4096,
      ubatch: 512,
    });
  });
});

describe("fromFitParams: the tool's table, corrected where llama-server differs, plus what it does not count", () => {
  it("generation: the logits of a whole micro-batch the tool reserves and the server does not are left out (64 wide, the tool's 'Host 8 0 63')", () => {
    const f = facts(64, 128, 2);
    const p = fromFitParams({ devices: [], host: host(8, 0, 63) }, f, pool(), { batch: 2048, ubatch: 512 });
    const formula = projectMemory(f, pool());
    // 63 MiB less 511 rows × 32,000 × 4 bytes is 0.62 MiB: the formula's 2.25 MiB lies between.
    expect(p.compute_bytes).toBe(formula.compute_bytes);
    expect(p).toMatchObject({
      method: 'fit-params',
      model_bytes: 8 * MiB,
      kv_bytes: 0,
      output_bytes: 128_000,
      engine_bytes: FIT_ENGINE_BASE_BYTES,
      partial: false,
      devices: [],
    });
    expect(p.total_bytes).toBe(8 * MiB + formula.compute_bytes + 128_000 + FIT_ENGINE_BASE_BYTES);
  });

  it("generation: the compute term stays within the tool's bounds (its figure, and its figure less those logits)", () => {
    // A wide feed-forward: one layer's activations (98 MiB) are the peak, not the logits.
    const f = facts(256, 16_384, 2);
    const formula = projectMemory(f, pool()).compute_bytes; // 99 MiB
    expect(
      fromFitParams({ devices: [], host: host(50, 4, 100) }, f, pool(), { batch: 2048, ubatch: 512 }).compute_bytes,
    ).toBe(formula);
    // The tool's figure is a ceiling …
    expect(
      fromFitParams({ devices: [], host: host(50, 4, 80) }, f, pool(), { batch: 2048, ubatch: 512 }).compute_bytes,
    ).toBe(80 * MiB);
    // … and its figure less the unreserved logits a floor (4 slots: 508 rows of 32,000 × 4 bytes).
    const small = facts(64, 128, 2);
    const p = fromFitParams({ devices: [], host: host(8, 2, 200) }, small, pool({ slots: 4 }), {
      batch: 2048,
      ubatch: 512,
    });
    expect(p.compute_bytes).toBe(200 * MiB - 508 * 128_000);
  });

  it("embeddings: the server reserves the whole batch's outputs as the tool does, so the tool's compute stands; the output buffer is the batch's logits", () => {
    const p = fromFitParams({ devices: [], host: host(21, 4, 127) }, facts(256, 688, 4), pool({ embeddings: true }), {
      batch: 1024,
      ubatch: 1024,
    });
    expect(p.compute_bytes).toBe(127 * MiB);
    expect(p.output_bytes).toBe(1024 * 32_000 * 4);
    expect(p.total_bytes).toBe((21 + 4 + 127) * MiB + 1024 * 32_000 * 4 + FIT_ENGINE_BASE_BYTES);
  });

  it("a header without the hyperparameters: the tool's figures as they are, the output buffer unknown (partial)", () => {
    const p = fromFitParams({ devices: [], host: host(8, 2, 63) }, { file_bytes: 9 * MiB }, pool(), {
      batch: 2048,
      ubatch: 512,
    });
    expect(p).toMatchObject({ compute_bytes: 63 * MiB, output_bytes: 0, partial: true });
  });

  it("a GPU pool: devices kept as the tool printed them; the host's share is the total", () => {
    const cuda = { name: 'CUDA0', model_mib: 258, context_mib: 64, compute_mib: 66, total_mib: 388 };
    const p = fromFitParams(
      { devices: [cuda], host: host(31, 0, 4) },
      facts(1024, 2816, 8),
      pool({ gpu_layers: 'all' }),
      {
        batch: 2048,
        ubatch: 512,
      },
    );
    expect(p.devices).toEqual([cuda]);
    expect(p.compute_bytes).toBe(4 * MiB); // the tool's host figure is the ceiling
    expect(p.total_bytes).toBe(35 * MiB + 128_000 + FIT_ENGINE_BASE_BYTES);
  });
});

describe('the real llama-fit-params (CPU build of the bundled tree, synthetic models)', () => {
  let tool: string;
  let models: ModelProvisioner;
  beforeAll(async () => {
    const binary = await ensureCpuTestEngine(pino({ level: 'silent' }));
    if (binary.fit_params_path === undefined) throw new Error('the test engine has no llama-fit-params');
    tool = binary.fit_params_path;
    models = new ModelProvisioner({ cacheDir: testCacheDir(), logger: pino({ level: 'silent' }), progressTty: false });
  }, 45 * 60_000);
  afterAll(async () => {
    await models?.close();
  });

  it('takes every flag passed on to it (a server-only one would make it exit 1)', async () => {
    const m = await models.ensure('synthetic:llama');
    const sample: Record<string, string> = {
      '-fa': 'on',
      '--flash-attn': 'off',
      '-ctk': 'f16',
      '--cache-type-k': 'f16',
      '-ctv': 'f16',
      '--cache-type-v': 'f16',
      '-ngl': '0',
      '--gpu-layers': 'all',
      '--n-gpu-layers': '0',
      '-sm': 'layer',
      '--split-mode': 'none',
      '-ts': '1',
      '--tensor-split': '1',
      '-mg': '0',
      '--main-gpu': '0',
      '-dev': 'none',
      '--device': 'none',
      '-ot': 'token_embd=CPU',
      '--override-tensor': 'token_embd=CPU',
      '-ncmoe': '1',
      '--n-cpu-moe': '1',
      '--override-kv': 'llama.block_count=int:2',
    };
    const args = [...FIT_FLAGS].flatMap(([flag, takesValue]) =>
      takesValue ? [flag, sample[flag] ?? (/batch|-u?b$/.test(flag) ? '512' : '')] : [flag],
    );
    expect(args).not.toContain('');
    const res = await run(tool, ['-m', m.local_path, '-c', '1024', '-np', '1', '--fit-print', 'on', ...args]);
    expect(res.stdout).toMatch(/^Host \d+ \d+ \d+ ?$/m);
    await expect(run(tool, ['-m', m.local_path, '--fit-print', 'on', '--metrics'])).rejects.toThrow();
  });

  it('a generation pool: the KV term is f16 K and V exactly, compute the server-sized figure within the bounds', async () => {
    const m = await models.ensure('synthetic:llama?ctx=8192');
    const f = memoryFactsOf(await readGgufHeader(m.local_path));
    const p = await projectWithFitParams({
      fitParams: tool,
      modelPath: m.local_path,
      facts: f,
      pool: pool({ ctx: 4096, slots: 2 }),
      env: {},
    });
    expect(p.method).toBe('fit-params');
    expect(p.kv_bytes).toBe(2 * 4096 * 128 * 2); // 2 layers × 4096 cells × (64 + 64) × 2 bytes = 2 MiB
    expect(p.compute_bytes).toBe(projectMemory(f, pool({ ctx: 4096, slots: 2 })).compute_bytes);
    expect(p.devices).toEqual([]);
  });

  it("an embeddings pool: the tool's compute holds the batch's logits (1024 × 32,000 × 4 bytes = 125 MiB)", async () => {
    const m = await models.ensure('synthetic:llama?embd=256&heads=4&layers=4&ff=688&ctx=8192&type=f16&role=embed');
    const f = memoryFactsOf(await readGgufHeader(m.local_path));
    const p = await projectWithFitParams({
      fitParams: tool,
      modelPath: m.local_path,
      facts: f,
      pool: pool({ embeddings: true }),
      env: {},
    });
    expect(p.compute_bytes).toBeGreaterThanOrEqual(125 * MiB);
    expect(p.output_bytes).toBe(1024 * 32_000 * 4);
  });
});

describe('PoolMemory: llama-fit-params when the engine has it, else the formula (logged once per pool)', () => {
  let dir: string;
  let models: ModelProvisioner;
  let small: string;
  let wide: string;
  const lines: Array<Record<string, unknown>> = [];
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fit-projection-'));
    models = new ModelProvisioner({ cacheDir: testCacheDir(), logger: pino({ level: 'silent' }), progressTty: false });
    small = (await models.ensure('synthetic:llama')).local_path;
    wide = (await models.ensure('synthetic:llama?ctx=8192')).local_path;
  }, 10 * 60_000);
  afterAll(async () => {
    await models?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A stand-in llama-fit-params: prints `Host 8 2 63` (or exits 1), and counts its runs. */
  function fixtureTool(name: string, ok: boolean): { path: string; runs: () => number } {
    const path = join(dir, name);
    const count = join(dir, `${name}.runs`);
    writeFileSync(count, '');
    writeFileSync(
      path,
      `#!/bin/sh\necho run >> '${count}'\n${ok ? "echo 'Host 8 2 63'" : "echo 'error: unknown argument' >&2; exit 1"}\n`,
    );
    chmodSync(path, 0o755);
    return { path, runs: () => readFileSync(count, 'utf8').split('\n').filter(Boolean).length };
  }

  function memory(): PoolMemory {
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString('utf8').split('\n'))
          if (l !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
        cb();
      },
    });
    return new PoolMemory({ table: new PoolTable(), budgetBytes: undefined, logger: pino({ level: 'info' }, sink) });
  }
  const logged = (msg: string, poolId: string): number =>
    lines.filter((l) => l.msg === msg && l.pool_id === poolId).length;

  it("runs the engine's tool once per model; a pool of the same build whose engine is not here yet uses it too", async () => {
    const ok = fixtureTool('ok', true);
    const mem = memory();
    const a = await mem.project(pool({ id: 'a' }), { local_path: small }, { fit_params_path: ok.path });
    expect(a).toMatchObject({ method: 'fit-params', model_bytes: 8 * MiB, kv_bytes: 2 * MiB });
    expect(await mem.project(pool({ id: 'a' }), { local_path: small })).toBe(a);
    expect(ok.runs()).toBe(1);
    expect((await mem.project(pool({ id: 'b' }), { local_path: small }))?.method).toBe('fit-params');
    expect(ok.runs()).toBe(2);
    // Another build (gpu optional) has no engine seen yet: the formula, nothing logged about a tool.
    expect((await mem.project(pool({ id: 'c', gpu: 'optional' }), { local_path: small }))?.method).toBe('formula');
    expect(lines.filter((l) => l.pool_id === 'c' && l.level === 40)).toEqual([]);
    expect(logged('memory projected', 'a')).toBe(1);
  });

  it('a failing tool: the formula, and why is logged once for the pool (a reload to another model runs it again, silently)', async () => {
    const bad = fixtureTool('bad', false);
    const mem = memory();
    const p = await mem.project(pool({ id: 'd' }), { local_path: small }, { fit_params_path: bad.path });
    expect(p?.method).toBe('formula');
    expect((await mem.project(pool({ id: 'd' }), { local_path: wide }, { fit_params_path: bad.path }))?.method).toBe(
      'formula',
    );
    expect(bad.runs()).toBe(2);
    expect(logged('llama-fit-params failed; memory projected with the formula', 'd')).toBe(1);
    const warn = lines.find((l) => l.pool_id === 'd' && l.level === 40);
    expect((warn?.err as { message?: string }).message).toMatch(/exited 1/);
    // Forgotten (unloaded) and loaded again: logged again.
    mem.forget('d');
    await mem.project(pool({ id: 'd' }), { local_path: small }, { fit_params_path: bad.path });
    expect(logged('llama-fit-params failed; memory projected with the formula', 'd')).toBe(2);
  });

  it('an engine without the tool (an external binary alone): the formula, logged once', async () => {
    const mem = memory();
    expect((await mem.project(pool({ id: 'e' }), { local_path: small }, {}))?.method).toBe('formula');
    expect((await mem.project(pool({ id: 'e' }), { local_path: wide }, {}))?.method).toBe('formula');
    expect(logged('the engine has no llama-fit-params; memory projected with the formula', 'e')).toBe(1);
  });
});
