import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HandoffFileSchema, type PoolStatus } from '@llama-orch/contracts';
import { procResidentBytes } from '../support/process-memory.js';
import { poolStatus, report, startHarness, until, waitReady, type Harness } from '../testing/harness.js';
import { projectModelFile, type MemoryProjection } from './memory-projection.js';

// Projected vs measured memory of real llama-server engines (spec 50, memory; issue 40's error
// table): synthetic models of several sizes and contexts are loaded on request, one at a time; each
// serves one request whose prompt fills a micro-batch (so the compute buffers are used), then the
// engine's resident size (/proc/<pid>/status VmRSS) is compared with both projections — the node's
// own, made with the engine's llama-fit-params, and the formula it falls back to — and the table
// is printed.
//
// The bound, 10 %, is the target, asserted for the llama-fit-params projection (the one the
// node uses); the formula's error is printed beside it. A projection is a ceiling for the full
// context (the attention mask grows with the cells in use), so the largest gap is a small model with
// a large context after a short request.

const MiB = 1024 * 1024;
const LONG_PROMPT = 'the cat sat on the mat and '.repeat(70); // ~490 tokens: most of a 512-token micro-batch

interface Row {
  id: string;
  model: string;
  ctx: number;
  slots: number;
  serve?: 'generate' | 'embeddings';
}

// Training context 8192 in every synthetic ref, so prompts are not capped at 256 tokens.
const ROWS: Row[] = [
  { id: 'm64-c1024', model: 'synthetic:llama?ctx=8192', ctx: 1024, slots: 1 },
  { id: 'm64-c4096-s2', model: 'synthetic:llama?ctx=8192', ctx: 4096, slots: 2 },
  {
    id: 'm256-c2048',
    model: 'synthetic:llama?embd=256&heads=4&layers=4&ff=688&ctx=8192&type=f16',
    ctx: 2048,
    slots: 1,
  },
  {
    id: 'm512-c1024',
    model: 'synthetic:llama?embd=512&heads=8&layers=8&ff=1376&ctx=8192&type=f16',
    ctx: 1024,
    slots: 1,
  },
  {
    id: 'm512-c4096-s2',
    model: 'synthetic:llama?embd=512&heads=8&layers=8&ff=1376&ctx=8192&type=f16',
    ctx: 4096,
    slots: 2,
  },
  {
    id: 'm1024-c2048',
    model: 'synthetic:llama?embd=1024&heads=16&layers=8&ff=2816&ctx=8192&type=f16',
    ctx: 2048,
    slots: 1,
  },
  {
    id: 'm256-embed-c1024',
    model: 'synthetic:llama?embd=256&heads=4&layers=4&ff=688&ctx=8192&type=f16&role=embed',
    ctx: 1024,
    slots: 1,
    serve: 'embeddings',
  },
];

interface Measured {
  row: Row;
  /** The node's own projection (llama-fit-params). */
  projection: MemoryProjection;
  /** The formula's, for the same model and pool. */
  formula: MemoryProjection;
  atReady: number;
  after: number;
  reported: number | undefined;
}

let h: Harness;
const results: Measured[] = [];

beforeAll(async () => {
  h = await startHarness({
    pools: [],
    onDemand: { memory_budget_bytes: 16 * 1024 * MiB, max_pools: 1, threads: 2 },
    supervision: { stopTimeoutMs: 3000 },
  });
}, 45 * 60_000);

afterAll(async () => {
  await h?.close();
});

async function post(path: string, body: unknown): Promise<{ status: number; text: string }> {
  const res = await request(`${h.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${h.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, text: await res.body.text() };
}

/** One pool at a time: load, measure at ready, serve a batch-filling request, measure again, unload. */
async function measure(row: Row): Promise<Measured> {
  const load = await post('/v2/pools', {
    pool_id: row.id,
    model: row.model,
    ctx: row.ctx,
    slots: row.slots,
    serve: row.serve ?? 'generate',
  });
  expect(load.status, load.text).toBe(202);
  await waitReady(h, row.id, 10 * 60_000);
  const handoff = HandoffFileSchema.parse(
    JSON.parse(readFileSync(join(h.runtime.engines, `${row.id}-r0.json`), 'utf8')),
  );
  const config = h.manager.poolConfigs().find((p) => p.id === row.id);
  if (config === undefined) throw new Error(`no config for ${row.id}`);
  // What the node projected for this load (the same inputs again: its kept projection, nothing rerun).
  const projection = await h.manager.memory.project(config, { local_path: handoff.model.path });
  if (projection === undefined) throw new Error(`no projection for ${row.id}`);
  const formula = await projectModelFile(handoff.model.path, config);
  const atReady = procResidentBytes(handoff.pid) ?? 0;
  const task = { task_id: crypto.randomUUID(), max_tokens: 8 };
  const served =
    row.serve === 'embeddings'
      ? // An input of nearly the whole context: one batch, every position an output.
        await post(`/v2/pools/${row.id}/completions`, {
          ...task,
          stream: false,
          call: { kind: 'embeddings', body: { input: 'the cat sat on the mat and '.repeat(140) } },
        })
      : await post(`/v2/pools/${row.id}/completions`, { ...task, prompt: LONG_PROMPT, greedy: true });
  expect(served.status).toBe(200);
  expect(served.text).not.toMatch(/"type":"error"/);
  const after = procResidentBytes(handoff.pid) ?? 0;
  const reported = (await poolStatus(h, row.id)).memory_bytes;
  const del = await request(`${h.url}/v2/pools/${row.id}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${h.token}` },
  });
  expect(del.statusCode).toBe(202);
  await del.body.dump();
  await until(
    async () =>
      (await request(`${h.url}/v2/pools`, { headers: { authorization: `Bearer ${h.token}` } })).body
        .json()
        .then((b) => (b as { pools: PoolStatus[] }).pools.length === 0),
    `${row.id} unloaded`,
    30_000,
    20,
  );
  return { row, projection, formula, atReady, after, reported };
}

const mib = (b: number): string => (b / MiB).toFixed(1);
const error = (projected: number, m: Measured): number => ((projected - m.after) / m.after) * 100;
const pct = (m: Measured): number => error(m.projection.total_bytes, m);
const signed = (e: number): string => `${e >= 0 ? '+' : ''}${e.toFixed(1)} %`;

describe('projected vs measured engine memory (real llama-server, synthetic models)', () => {
  it(
    'every configuration is measured; the table is printed',
    async () => {
      for (const row of ROWS) results.push(await measure(row));
      const lines = [
        'pool             | llama-fit-params: model    KV compute output engine     total | formula | RSS ready | RSS after | error fit | error formula',
        ...results.map((m) => {
          const p = m.projection;
          return [
            m.row.id.padEnd(16),
            '|                ',
            mib(p.model_bytes).padStart(6),
            mib(p.kv_bytes).padStart(5),
            mib(p.compute_bytes).padStart(7),
            mib(p.output_bytes).padStart(6),
            mib(p.engine_bytes).padStart(6),
            mib(p.total_bytes).padStart(9),
            '|',
            mib(m.formula.total_bytes).padStart(7),
            '|',
            mib(m.atReady).padStart(9),
            '|',
            mib(m.after).padStart(9),
            '|',
            signed(pct(m)).padStart(9),
            '|',
            signed(error(m.formula.total_bytes, m)).padStart(13),
          ].join(' ');
        }),
        '(MiB; error = (projected − RSS after) / RSS after)',
      ];
      report(`memory projection vs measurement\n${lines.join('\n')}`);
      expect(results).toHaveLength(ROWS.length);
    },
    30 * 60_000,
  );

  it("the node's projection is llama-fit-params' (CPU build: no devices)", () => {
    for (const m of results) {
      expect(m.projection.method, m.row.id).toBe('fit-params');
      expect(m.projection.devices, m.row.id).toEqual([]);
      expect(m.formula.method, m.row.id).toBe('formula');
    }
  });

  it('the llama-fit-params projection is within 10 % of the resident size after a batch-filling request, for every configuration', () => {
    expect(results).toHaveLength(ROWS.length);
    for (const m of results) expect(Math.abs(pct(m)), m.row.id).toBeLessThanOrEqual(10);
  });

  it("the reported memory_bytes is the larger of RSS and the projection (an embeddings engine's logits buffers are untouched at ready)", () => {
    for (const m of results) {
      expect(m.reported, m.row.id).toBeGreaterThanOrEqual(m.projection.total_bytes);
      expect(m.reported, m.row.id).toBeLessThanOrEqual(Math.max(m.projection.total_bytes, m.after * 1.05));
    }
    const embed = results.find((m) => m.row.serve === 'embeddings');
    expect(embed).toBeDefined();
    // RSS at ready would under-count it by most of its buffers: the reason memory_bytes never goes below the projection.
    expect(embed!.atReady).toBeLessThan(embed!.projection.total_bytes * 0.5);
  });
});
