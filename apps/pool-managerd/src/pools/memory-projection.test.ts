import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { testCacheDir } from '@llama-orch/engine-provisioner';
import { ModelProvisioner, readGgufHeader } from '@llama-orch/model-provisioner';
import {
  ENGINE_BASE_BYTES,
  describeProjection,
  memoryFactsOf,
  projectMemory,
  type ModelMemoryFacts,
} from './memory-projection.js';

const MiB = 1024 * 1024;

/** A synthetic llama's facts: `embd` wide, `ff` feed-forward, `layers` blocks, KV heads = heads, 32k vocab. */
function synthetic(embd: number, ff: number, layers: number): ModelMemoryFacts {
  return {
    file_bytes: 0,
    n_layer: layers,
    n_embd: embd,
    n_ff: ff,
    n_vocab: 32_000,
    n_embd_k_gqa: embd,
    n_embd_v_gqa: embd,
  };
}

const pool = (ctx: number, slots: number, serve: 'generate' | 'embeddings' | 'reranking' = 'generate') => ({
  ctx,
  slots,
  determinism: false,
  embeddings: serve === 'embeddings',
  reranking: serve === 'reranking',
});

// What this checkout's llama-server (CPU build, flash attention auto, -t 2) logged for each
// configuration: `llama_kv_cache: CPU KV buffer size` and `sched_reserve: CPU compute buffer size`,
// MiB. Embedding and reranking pools run with `-b`/`-ub` = ctx, as engine-flags gives them.
const LOGGED: Array<[string, ModelMemoryFacts, ReturnType<typeof pool>, number, number]> = [
  ['64 wide, 1024 ctx', synthetic(64, 128, 2), pool(1024, 1), 0.5, 2.01],
  ['64 wide, 4096 ctx, 4 slots', synthetic(64, 128, 2), pool(4096, 4), 2, 2.01],
  ['64 wide, 8192 ctx', synthetic(64, 128, 2), pool(8192, 1), 4, 9.01],
  ['256 wide, 1024 ctx', synthetic(256, 688, 4), pool(1024, 1), 4, 7.04],
  ['256 wide, 4096 ctx, 2 slots', synthetic(256, 688, 4), pool(4096, 2), 16, 8.04],
  ['256 wide, 1024 ctx, 4 slots', synthetic(256, 688, 4), pool(1024, 4), 4, 6.29],
  ['512 wide, 4096 ctx', synthetic(512, 1376, 8), pool(4096, 1), 64, 16.07],
  ['512 wide, 1024 ctx, 4 slots', synthetic(512, 1376, 8), pool(1024, 4), 16, 12.32],
  ['1024 wide, 512 ctx', synthetic(1024, 2816, 8), pool(512, 1), 16, 25.01],
  ['1024 wide, 8192 ctx', synthetic(1024, 2816, 8), pool(8192, 1), 256, 32.51],
  ['256 wide embeddings, 1024 ctx', synthetic(256, 688, 4), pool(1024, 1, 'embeddings'), 4, 128.03],
  ['256 wide embeddings, 4096 ctx', synthetic(256, 688, 4), pool(4096, 1, 'embeddings'), 16, 536.12],
  ['256 wide reranking, 4096 ctx, 2 slots', synthetic(256, 688, 4), pool(4096, 2, 'reranking'), 16, 520.11],
];

describe('memory projection', () => {
  it.each(LOGGED)(
    '%s: KV exactly, compute within 1 % (0.25 MiB) of what llama-server allocates',
    (_name, facts, p, kv, compute) => {
      const proj = projectMemory(facts, p);
      expect(proj.kv_bytes / MiB).toBe(kv);
      expect(Math.abs(proj.compute_bytes / MiB - compute)).toBeLessThanOrEqual(Math.max(0.01 * compute, 0.25));
      // One logits row per slot; for embeddings and reranking one per position of the batch (= ctx here).
      expect(proj.output_bytes).toBe(32_000 * 4 * (p.embeddings || p.reranking ? p.ctx : p.slots));
      expect(proj.total_bytes).toBe(
        proj.model_bytes + proj.kv_bytes + proj.compute_bytes + proj.output_bytes + ENGINE_BASE_BYTES,
      );
    },
  );

  it('pads the context as llama.cpp does: to 256 cells, then each slot share to 256 again', () => {
    // 1000 → 1024; 3 slots → 341 → 512 each → 1536 cells.
    const p = projectMemory(synthetic(64, 128, 2), pool(1000, 3));
    expect(p.kv_bytes).toBe(2 * 1536 * 128 * 2);
    // The determinism profile runs one slot whatever `slots` says.
    expect(projectMemory(synthetic(64, 128, 2), { ...pool(1024, 4), determinism: true }).output_bytes).toBe(128_000);
  });

  it('without the hyperparameters it needs, only the file and the engine are counted, and it says so', () => {
    const p = projectMemory({ file_bytes: 5 * MiB }, pool(2048, 1));
    expect(p).toMatchObject({ total_bytes: 5 * MiB + ENGINE_BASE_BYTES, kv_bytes: 0, compute_bytes: 0, partial: true });
    expect(describeProjection(p)).toMatch(/^26 MiB \(model 5\.0 .*KV and compute unknown/);
  });

  it("reads a real synthetic model's header: 2 layers, 64 wide, 128 feed-forward, 32,000 tokens", async () => {
    const logger = pino({ level: 'silent' });
    const models = new ModelProvisioner({ cacheDir: testCacheDir(), logger, progressTty: false });
    try {
      const m = await models.ensure('synthetic:llama');
      expect(memoryFactsOf(await readGgufHeader(m.local_path))).toEqual({
        file_bytes: m.size_bytes,
        n_layer: 2,
        n_embd: 64,
        n_ff: 128,
        n_vocab: 32_000,
        n_embd_k_gqa: 64,
        n_embd_v_gqa: 64,
      });
    } finally {
      await models.close();
    }
  }, 120_000);
});
