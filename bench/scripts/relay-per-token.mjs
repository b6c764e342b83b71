#!/usr/bin/env node
// `node bench/scripts/relay-per-token.mjs [<root> …]` after `pnpm build` in each root (default: this
// checkout): orchestratord's own work per relayed token, in-process, from the node's NDJSON line
// to the text handed to the client's socket — the line read and checked (`readDispatchEvents`),
// the record appended to the task's frame log, and the door's writer (the /v2 SSE stream; the /v1
// chat chunk stream). Sockets are stubs that count bytes, so only our JavaScript is timed. Several
// roots (e.g. the build before a change and after it) run in interleaved rounds; medians printed.
// Rounds: 15 × 2,000 streams of 128 tokens per root and door.
import { EventEmitter } from 'node:events';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const roots = process.argv.slice(2).length > 0 ? process.argv.slice(2) : [resolve(import.meta.dirname, '../..')];
const ROUNDS = Number(process.env.ROUNDS ?? 15);
const STREAMS = 2_000;
const TOKENS = 128;

const lines = Array.from({ length: TOKENS }, (_, i) =>
  Buffer.from(`${JSON.stringify({ type: 'token', t: ` word${i}`, i })}\n`),
);
const endLine = Buffer.from(
  `${JSON.stringify({ type: 'end', tokens_out: TOKENS, decode_ms: 10, stop_type: 'limit', engine_version: 'b1', pool_id: 'p', node_id: 'n' })}\n`,
);
const who = {
  kind: 'chat',
  id: 'chatcmpl-5f0c1f3e-8f1c-4a8e-9c55-3b0a3f1d2e11',
  created: 1764000000,
  model: 'synthetic',
};

/** A ServerResponse stand-in: takes every write, never backs up. */
function fakeRes() {
  const res = new EventEmitter();
  res.bytes = 0;
  res.writeHead = () => res;
  res.flushHeaders = () => undefined;
  res.write = (s) => ((res.bytes += s.length), true);
  res.end = (s) => ((res.bytes += s === undefined ? 0 : s.length), undefined);
  return res;
}

/** A node response body stand-in: `data` events fired by hand. */
function fakeBody() {
  const body = new EventEmitter();
  body.destroy = () => undefined;
  return body;
}

async function load(root) {
  const dist = pathToFileURL(resolve(root, 'apps/orchestratord/dist')).href;
  const imp = (p) => import(`${dist}/${p}`).catch(() => undefined);
  const [taskStream, events, sseWriter, relay, taskEventStream, frameEncoder, chunkEncoder] = await Promise.all([
    imp('streams/task-stream.js'),
    imp('upstream/dispatch-events.js'),
    imp('streams/sse-writer.js'),
    imp('openai/relay.js'),
    imp('streams/task-event-stream.js'),
    imp('streams/frame-encoder.js'),
    imp('openai/chunk-encoder.js'),
  ]);
  const common = { keepaliveMs: 60_000, headers: {} };
  // One subscriber per door, by whichever API the build has.
  const v2 =
    taskEventStream !== undefined
      ? (res, stream) =>
          new taskEventStream.TaskEventStream({
            ...common,
            res,
            stream,
            encoder: frameEncoder.V2_SSE,
            onAbandoned: () => undefined,
          })
      : (res, stream) =>
          sseWriter.serveTaskStream({
            ...common,
            res,
            stream,
            verbose: false,
            afterId: undefined,
            onClientGone: () => undefined,
          });
  const v1 =
    chunkEncoder !== undefined
      ? (res, stream) =>
          new taskEventStream.TaskEventStream({
            ...common,
            res,
            stream,
            encoder: new chunkEncoder.OpenAiChunkEncoder(who, false, () => 'b1'),
            lazyHead: true,
            onRefused: () => undefined,
            onAbandoned: () => undefined,
          })
      : (res, stream) =>
          relay.relayOpenAi({
            ...common,
            res,
            stream,
            who,
            streaming: true,
            includeUsage: false,
            fingerprint: () => 'b1',
            onClientGone: () => undefined,
          });
  return { TaskStream: taskStream.TaskStream, readDispatchEvents: events.readDispatchEvents, v2, v1 };
}

/** One task's relay: the node's lines in, the token sink's append, the door's writes out. */
function relayOne(build, door) {
  const stream = new build.TaskStream();
  stream.append({ event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } });
  const res = fakeRes();
  door(res, stream);
  const body = fakeBody();
  let tokens = 0;
  void build.readDispatchEvents(body, (ev) => {
    if (ev.type === 'token') {
      const data = { t: ev.t, i: tokens };
      if (stream.appendToken !== undefined) stream.appendToken(data);
      else stream.append({ event: 'token', data });
      tokens += 1;
    } else {
      stream.append({
        event: 'end',
        data: { tokens_out: ev.tokens_out, decode_ms: ev.decode_ms, decode_time_ms: ev.decode_ms },
      });
    }
    return true;
  });
  for (const l of lines) body.emit('data', l);
  body.emit('data', endLine);
  body.emit('end');
  return res.bytes;
}

const builds = await Promise.all(roots.map(load));
const samples = roots.map(() => ({ v2: [], v1: [] }));
for (let round = -2; round < ROUNDS; round++) {
  for (const [k, build] of builds.entries()) {
    for (const door of ['v2', 'v1']) {
      const t0 = process.hrtime.bigint();
      let bytes = 0;
      for (let s = 0; s < STREAMS; s++) bytes += relayOne(build, build[door]);
      const ns = Number(process.hrtime.bigint() - t0);
      if (round >= 0 && bytes > 0) samples[k][door].push(ns / STREAMS / TOKENS / 1000);
    }
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const [k, root] of roots.entries()) {
  const s = samples[k];
  console.log(
    `${root}: /v2 ${median(s.v2).toFixed(3)} µs/token, /v1 chat ${median(s.v1).toFixed(3)} µs/token (medians of ${ROUNDS} rounds)`,
  );
}
