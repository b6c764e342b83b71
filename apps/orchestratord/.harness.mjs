import { Session } from 'node:inspector/promises';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { destination, pino } from 'pino';
import { OrchestratorConfigSchema } from '@llama-orch/contracts';
import { buildApp } from './dist/app.js';
import { createUpstreamDispatchers } from './dist/upstream.js';

const TOKEN = 'harness-token-0123456789';
const config = OrchestratorConfigSchema.parse({ api_token: TOKEN, heartbeat_interval_ms: 100000 });
const dest = destination({ dest: '/tmp/ana/harness.log', sync: false, minLength: 4096 });
const logger = pino({ name: 'orchestratord', level: 'info' }, dest);
const upstream = createUpstreamDispatchers();
const app = await buildApp({ logger, upstream: upstream.http1, upstreamH2c: upstream.h2c }, config);
const auth = { authorization: `Bearer ${TOKEN}` };
const pools = [{ pool_id: 'p0', state: 'ready', ready: true, draining: false, slots_total: 1, slots_free: 0, models: ['m'], engine_version: 'v1', ctx: 4096, deterministic: false, decode_tps: 0 }];
let r = await app.inject({ method: 'POST', url: '/v2/nodes/register', headers: auth, payload: { node_id: 'n0', machine_id: 'n0', address: 'http://127.0.0.1:9', pools, capabilities: { gpus: [], cpu_cores: 1, ram_total_bytes: 1 }, version: 'x' } });
if (r.statusCode !== 200) throw new Error(r.body);
r = await app.inject({ method: 'POST', url: '/v2/nodes/n0/heartbeat', headers: auth, payload: { timestamp: new Date().toISOString(), pools } });
if (r.statusCode !== 200) throw new Error(r.body);
function body() {
  return JSON.stringify({ task_id: randomUUID(), session_id: randomUUID(), workload: 'completion', model_ref: 'm', engine: 'llamacpp', ctx: 0, priority: 'interactive', prompt: 'Write a haiku about queues.', max_tokens: 32, deadline_ms: 3600000 });
}
const hdr = { ...auth, 'content-type': 'application/json' };
async function pairs(n) {
  const bodies = Array.from({ length: n }, body);
  for (let i = 0; i < n; i++) {
    const a = await app.inject({ method: 'POST', url: '/v2/tasks', headers: hdr, payload: bodies[i] });
    if (a.statusCode !== 202) throw new Error(a.body);
    const id = JSON.parse(bodies[i]).task_id;
    const c = await app.inject({ method: 'POST', url: `/v2/tasks/${id}/cancel`, headers: auth });
    if (c.statusCode !== 204) throw new Error(c.body);
  }
}
await pairs(5000);
const mode = process.argv[2] ?? 'alloc';
if (mode === 'alloc') {
  const s = new Session(); s.connect();
  await s.post('HeapProfiler.startSampling', { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  await pairs(10000);
  const { profile } = await s.post('HeapProfiler.stopSampling');
  writeFileSync('/tmp/ana/alloc.heapprofile', JSON.stringify(profile));
  const self = new Map(); let total = 0;
  const walk = (n, stack) => {
    const f = n.callFrame; const k = `${f.functionName || '(anon)'} ${f.url.replace(/^.*node_modules\/\.pnpm\/([^/]+)\/.*\/([^/]+)$/, '$1:$2').replace(/^file:\/\/\/work\/main\//, '')}:${f.lineNumber + 1}`;
    self.set(k, (self.get(k) ?? 0) + n.selfSize); total += n.selfSize;
    for (const c of n.children) walk(c, stack);
  };
  walk(profile.head, []);
  console.log('sampled bytes per pair', Math.round(total / 10000));
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 45)) console.log(String(Math.round(v / 10000)).padStart(6), k);
} else {
  const t0 = performance.now(); const c0 = process.cpuUsage();
  await pairs(20000);
  const c = process.cpuUsage(c0); const t = performance.now() - t0;
  console.log('us/pair wall', (t * 1000 / 20000).toFixed(1), 'cpu', ((c.user + c.system) / 20000).toFixed(1));
}
await app.close(); await upstream.close();
