#!/usr/bin/env node
// `node bench/scripts/node-hop-floor.mjs <llama-server> <model.gguf>` (after `pnpm install`; e.g. the
// binary under .cache/llama-orch/engines/*/ and the synthetic model under .cache/llama-orch/models/):
// what ONE Node.js process between a client and llama-server costs per streamed token, at the least,
// by how much it parses. Each hop is a child process holding nothing but the pass-through:
//   raw    — net.Socket pipe both ways (no HTTP parsing at all: Node's I/O path alone)
//   http   — node:http server + node:http client, bodies piped (the relay bench's "floor" hop)
//   undici — node:http server + undici's dispatch handler API, res.write per body chunk (how
//            pool-managerd reads the engine)
// Interleaved rounds of the relay bench's request (greedy 128 tokens, 1 slot, 1 thread), rotating the
// order; CPU = utime + stime of the hop process around its requests ÷ SSE frames delivered.
// Used in .specs/80-performance.md ("The relay against nginx") to show where the Node floor lies.
import { fork, spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRequire } from 'node:module';

const require = createRequire(new URL('../package.json', import.meta.url));
const { Agent, Pool, request } = require('undici');

if (process.argv[2] === '--hop') {
  const [kind, tport] = process.argv.slice(3);
  const port = Number(tport);
  let server;
  if (kind === 'raw') {
    server = net.createServer((c) => {
      const u = net.connect(port, '127.0.0.1');
      c.setNoDelay(true);
      u.setNoDelay(true);
      c.pipe(u);
      u.pipe(c);
      for (const [a, b] of [
        [c, u],
        [u, c],
      ]) {
        a.on('error', () => b.destroy());
        a.on('close', () => b.destroy());
      }
    });
  } else if (kind === 'http') {
    server = http.createServer((req, res) => {
      const up = http.request(
        { host: '127.0.0.1', port, path: req.url, method: req.method, headers: req.headers, agent: false },
        (r) => {
          res.writeHead(r.statusCode, r.headers);
          r.pipe(res);
        },
      );
      req.pipe(up);
    });
  } else {
    const pool = new Pool(`http://127.0.0.1:${port}`);
    server = http.createServer((req, res) => {
      const body = [];
      req.on('data', (c) => body.push(c));
      req.on('end', () => {
        pool.dispatch(
          {
            method: 'POST',
            path: req.url,
            headers: { 'content-type': 'application/json' },
            body: Buffer.concat(body),
            reset: true,
          },
          {
            onConnect() {},
            onUpgrade() {},
            onError() {
              res.destroy();
            },
            onHeaders(status) {
              res.writeHead(status, { 'content-type': 'text/event-stream' });
              res.flushHeaders();
              return true;
            },
            onData(chunk) {
              res.write(chunk);
              return true;
            },
            onComplete() {
              res.end();
            },
          },
        );
      });
    });
  }
  server.listen(0, '127.0.0.1', () => process.send(server.address().port));
  process.on('message', () => {
    const u = process.cpuUsage();
    process.send(u.user + u.system);
  });
} else {
  const [BIN, MODEL] = process.argv.slice(2);
  if (BIN === undefined || MODEL === undefined) {
    process.stderr.write('usage: node bench/scripts/node-hop-floor.mjs <llama-server> <model.gguf>\n');
    process.exit(2);
  }
  const EP = 18977;
  const engine = spawn(BIN, ['-m', MODEL, '--port', String(EP), '-np', '1', '-t', '1', '-c', '4096', '--no-webui'], {
    stdio: 'ignore',
  });
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${EP}/health`)).ok) break;
    } catch {
      /* starting */
    }
    await sleep(50);
  }
  const startHop = async (kind) => {
    const child = fork(new URL(import.meta.url).pathname, ['--hop', kind, String(EP)]);
    const port = await new Promise((r) => child.once('message', r));
    return {
      child,
      port,
      cpu: () =>
        new Promise((r) => {
          child.once('message', r);
          child.send('cpu');
        }),
    };
  };
  const hops = { raw: await startHop('raw'), http: await startHop('http'), undici: await startHop('undici') };
  const agent = new Agent({ connections: 2 });
  const names = ['direct', 'raw', 'http', 'undici'];
  const ttft = Object.fromEntries(names.map((n) => [n, []]));
  const cpu = Object.fromEntries(names.map((n) => [n, 0]));
  const frames = Object.fromEntries(names.map((n) => [n, 0]));
  const WARMUP = 10,
    ROUNDS = 200;
  for (let i = 0; i < WARMUP + ROUNDS; i++) {
    for (let k = 0; k < names.length; k++) {
      const n = names[(i + k) % names.length];
      const hop = hops[n];
      const before = hop === undefined ? 0 : await hop.cpu();
      const t0 = performance.now();
      const res = await request(`http://127.0.0.1:${hop?.port ?? EP}/completion`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        dispatcher: agent,
        reset: hop === undefined,
        body: JSON.stringify({
          prompt: 'Once upon a time, in a data centre far away,',
          n_predict: 128,
          stream: true,
          cache_prompt: false,
          seed: i,
          temperature: 0,
        }),
      });
      let first;
      let count = 0;
      for await (const chunk of res.body) {
        const text = chunk.toString();
        if (first === undefined && text.includes('"content":"')) first = performance.now();
        count += text.split('data: ').length - 1;
      }
      await sleep(10);
      const after = hop === undefined ? 0 : await hop.cpu();
      if (i >= WARMUP) {
        ttft[n].push(first - t0);
        cpu[n] += after - before;
        frames[n] += count;
      }
    }
  }
  const p50 = (a) => [...a].sort((x, y) => x - y)[Math.floor((a.length - 1) / 2)];
  for (const n of names) {
    const added = n === 'direct' ? '' : `  added ${(p50(ttft[n]) - p50(ttft.direct)).toFixed(3)} ms`;
    const perToken = n === 'direct' ? '' : `  CPU ${(cpu[n] / frames[n]).toFixed(1)} µs per token`;
    console.log(`${n.padEnd(7)} TTFT p50 ${p50(ttft[n]).toFixed(3)} ms${added}${perToken}`);
  }
  engine.kill();
  for (const h of Object.values(hops)) h.child.kill();
  await agent.close();
}
