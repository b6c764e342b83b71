#!/usr/bin/env node
// `node bench/scripts/chat-path.mjs <llama-server> <model.gguf>` (a model with a chat template, e.g. the
// out-of-the-box synthetic one from .cache/llama-orch/models): measured once to choose how
// pool-managerd runs a chat (.specs/80-performance.md, "chat through the engine's OpenAI route").
// Which engine path for chat: /v1/chat/completions (one request; the engine renders the template)
// vs POST /apply-template + POST /completion (two requests). Interleaved A B A B, TTFT and total.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
const BIN = process.argv[2],
  MODEL = process.argv[3],
  PORT = 18931,
  URL = `http://127.0.0.1:${PORT}`;
const srv = spawn(BIN, ['-m', MODEL, '--port', String(PORT), '-np', '1', '-t', '1', '-c', '4096', '--no-webui'], {
  stdio: 'ignore',
});
for (let i = 0; i < 200; i++) {
  try {
    if ((await fetch(`${URL}/health`)).ok) break;
  } catch {}
  await sleep(50);
}
const messages = [
  { role: 'system', content: 'You are a poet.' },
  { role: 'user', content: 'Write a haiku about GPUs and the sea at night.' },
];
async function ttftOf(res) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '',
    first;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value);
    if (first === undefined && /"content":"[^"]/.test(buf)) first = performance.now();
  }
  return first;
}
async function chat() {
  const t0 = performance.now();
  const res = await fetch(`${URL}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 32, stream: true, temperature: 0, seed: 1, cache_prompt: false }),
  });
  const f = await ttftOf(res);
  return [f - t0, performance.now() - t0];
}
async function twoStep() {
  const t0 = performance.now();
  const tpl = await (
    await fetch(`${URL}/apply-template`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages }),
    })
  ).json();
  const res = await fetch(`${URL}/completion`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      prompt: tpl.prompt,
      n_predict: 32,
      stream: true,
      temperature: 0,
      seed: 1,
      cache_prompt: false,
    }),
  });
  const f = await ttftOf(res);
  return [f - t0, performance.now() - t0];
}
const a = [],
  b = [];
for (let i = 0; i < 10; i++) {
  await chat();
  await twoStep();
}
for (let i = 0; i < 100; i++) {
  if (i % 2) {
    a.push(await chat());
    b.push(await twoStep());
  } else {
    b.push(await twoStep());
    a.push(await chat());
  }
  await sleep(20);
}
const q = (xs, p) => {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))].toFixed(2);
};
for (const [n, xs] of [
  ['/v1/chat/completions', a],
  ['/apply-template + /completion', b],
])
  console.log(
    `${n}: TTFT p50 ${q(
      xs.map((x) => x[0]),
      0.5,
    )} ms p99 ${q(
      xs.map((x) => x[0]),
      0.99,
    )} ms; total p50 ${q(
      xs.map((x) => x[1]),
      0.5,
    )} ms (100 requests, interleaved)`,
  );
srv.kill('SIGKILL');
