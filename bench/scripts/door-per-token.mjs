#!/usr/bin/env node
// `node bench/scripts/door-per-token.mjs` after `pnpm build`: the /v1 door's own work per streamed
// chat token, with and without the two shortcuts in .specs/80-performance.md ("plain chat pieces
// from a cached head", "newest frame as appended"). 128-piece responses, 20,000 of each, in-process.
import { ChunkRenderer } from '../../apps/orchestratord/dist/openai/chunks.js';
import { TaskStream } from '../../apps/orchestratord/dist/streams/task-stream.js';

const who = {
  kind: 'chat',
  id: 'chatcmpl-5f0c1f3e-8f1c-4a8e-9c55-3b0a3f1d2e11',
  created: 1764000000,
  model: 'synthetic',
};
const pieces = Array.from({ length: 128 }, (_, i) => ` word${i}`);
const frames = pieces.map((t, i) => ({ event: 'token', data: { t, i } }));
const started = { event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } };
const N = 20_000;

function time(label, fn) {
  for (let k = 0; k < 3; k++) fn();
  const t0 = process.hrtime.bigint();
  let sink = 0;
  for (let k = 0; k < N; k++) sink += fn();
  const ns = Number(process.hrtime.bigint() - t0);
  console.log(`${label.padEnd(44)} ${(ns / N / pieces.length / 1000).toFixed(3)} µs/token${sink > 0 ? '' : ' (!)'}`);
}

// An empty `delta` object sends a piece down the general path (object + JSON.stringify) with the same bytes.
time('chunk: cached head (plain piece)', () => {
  const r = new ChunkRenderer(who, false);
  r.open('b1-de3ff81');
  let n = 0;
  for (const t of pieces) n += r.token({ t, i: 0 }).length;
  return n;
});
time('chunk: general form', () => {
  const r = new ChunkRenderer(who, false);
  r.open('b1-de3ff81');
  let n = 0;
  for (const t of pieces) n += r.token({ t, i: 0, delta: {} }).length;
  return n;
});
// Both append every frame (kept as a record); they differ in reading the newest (the appended object) or the one before (a view made for the read).
time('frame log: append + read the newest (object)', () => {
  const s = new TaskStream();
  s.append(started);
  let n = 0;
  for (const f of frames) n += s.frame(s.append(f)).data.i + 1;
  return n;
});
time('frame log: append + read one back (view)', () => {
  const s = new TaskStream();
  s.append(started);
  let n = 0;
  for (const f of frames) n += s.frame(s.append(f) - 1) === undefined ? 0 : 1;
  return n;
});
