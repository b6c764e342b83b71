// Process level: the built `llorch` (dist/main.js) as a user runs it — exit codes, what goes to
// stdout and stderr, --json documents, Ctrl-C. The tsc build runs first (incremental).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { formatSseFrame } from '@llama-orch/contracts';
import { fixtureOrchestrator, type FixtureOptions, type FixtureOrchestrator } from './testing/fixture-orchestrator.js';

const PKG = dirname(dirname(fileURLToPath(import.meta.url)));
const MAIN = join(PKG, 'dist', 'main.js');
const VERSION = (JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8')) as { version: string }).version;
const TASK = '00000000-0000-4000-8000-000000000001';
const STACK_LINE = /^\s+at /m;

beforeAll(() => {
  execFileSync('npx', ['tsc', '--build', PKG], { cwd: PKG, stdio: 'inherit' });
}, 120_000);

const servers: FixtureOrchestrator[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
async function fixture(frames: string[], opts: FixtureOptions = {}): Promise<FixtureOrchestrator> {
  const f = await fixtureOrchestrator(frames, opts);
  servers.push(f);
  return f;
}

/** Runs llorch with a clean environment (no LLORCH_URL/NO_COLOR from the caller). */
function llorch(args: string[], env: Record<string, string> = {}) {
  return execa(process.execPath, [MAIN, ...args], {
    reject: false,
    env: { PATH: process.env.PATH ?? '', ...env },
    extendEnv: false,
  });
}

const NODE = {
  node_id: 'n1',
  machine_id: 'm1',
  address: 'http://127.0.0.1:9200',
  state: 'online',
  state_since: '2026-01-01T00:00:00Z',
  last_seen: '2026-01-01T00:00:01Z',
  capabilities: { gpus: [], cpu_cores: 4, ram_total_bytes: 1024 },
  version: '0.1.0',
  pools: [],
};
const POOL = {
  pool_id: 'p1',
  node_id: 'n1',
  node_state: 'online',
  state: 'ready',
  ready: true,
  draining: false,
  slots_total: 2,
  slots_free: 1,
  leased: 1,
  models: ['synthetic:llama'],
  engine_version: 'b1',
};
const MODEL = {
  id: 'synthetic:llama',
  ref: 'synthetic:llama',
  status: 'ready',
  pools: ['n1/p1'],
  aliases: ['synthetic'],
  registered: false,
  pinned: true,
  idle_since: '2026-01-01T00:00:05.000Z',
};
const LAZY = {
  id: 'hf:org/repo/qwen.gguf',
  ref: 'hf:org/repo/qwen.gguf',
  status: 'failed',
  pools: [],
  aliases: ['qwen'],
  registered: true,
  pinned: false,
  last_error: 'sha256 mismatch',
};
const ENDED_TASK = {
  task_id: TASK,
  state: 'ended',
  model: 'synthetic',
  model_ref: 'synthetic:llama',
  priority: 'interactive',
  workload: 'chat',
  door: 'chat',
  correlation_id: 'req-7',
  admitted_at: Date.parse('2026-01-01T00:00:00Z'),
  pool_id: 'p1',
  node_id: 'n1',
  attempts: 1,
  outcome: { result: 'completed', stop_type: 'eos', finish_reason: 'stop' },
  usage: { tokens_in: 9, tokens_out: 31 },
  timings: { queued_ms: 2, first_token_ms: 45, total_ms: 900, ended_at: Date.parse('2026-01-01T00:00:00.900Z') },
};
const QUEUED_TASK = {
  ...ENDED_TASK,
  task_id: 'q-2',
  state: 'queued',
  priority: 'batch',
  door: 'v2',
  queue_position: 0,
  predicted_start_ms: 250,
  pool_id: undefined,
  node_id: undefined,
  attempts: 0,
  outcome: undefined,
  usage: { tokens_out: 0 },
  timings: {},
};
const ROUTES: FixtureOptions['routes'] = {
  'GET /v2/nodes': { status: 200, body: { nodes: [NODE] } },
  'GET /v2/pools': { status: 200, body: { pools: [POOL] } },
  'GET /metrics': { status: 200, body: '# TYPE queue_depth gauge\nqueue_depth{priority="interactive"} 3\n' },
  'GET /v2/catalog/models': { status: 200, body: { models: [MODEL, LAZY] } },
  'GET /v2/tasks?limit=2': { status: 200, body: { tasks: [QUEUED_TASK], next_cursor: 'page-2' } },
  'GET /v2/tasks?limit=1&cursor=page-2': { status: 200, body: { tasks: [ENDED_TASK] } },
  'GET /v2/tasks?state=ended&limit=50': { status: 200, body: { tasks: [ENDED_TASK] } },
  [`GET /v2/tasks/${TASK}`]: { status: 200, body: ENDED_TASK },
  'GET /v2/tasks/expired': {
    status: 404,
    body: { code: 'NOT_FOUND', message: "task 'expired' not found", retriable: false },
  },
};

describe('llorch: version, help and usage errors', () => {
  it('--version and -V print the package version, exit 0', async () => {
    for (const flag of ['--version', '-V']) {
      const r = await llorch([flag]);
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toBe(`llorch ${VERSION}`);
    }
  });

  it('--help and <command> --help print usage on stdout, exit 0', async () => {
    const top = await llorch(['--help']);
    expect(top.exitCode).toBe(0);
    for (const c of [
      'up',
      'submit',
      'status',
      'nodes',
      'models',
      'load',
      'unload',
      'tasks',
      'task',
      'cancel',
      'drain',
      'reload',
    ])
      expect(top.stdout).toContain(`\n  ${c} `);
    const sub = await llorch(['drain', '--help']);
    expect(sub.exitCode).toBe(0);
    expect(sub.stdout).toMatch(/^usage: llorch drain <pool-id> \[--deadline-ms MS\]/);
  });

  it('an unknown flag, command or a missing argument: one line and the usage on stderr, exit 2, no stack trace', async () => {
    const cases: Array<[string[], string, RegExp]> = [
      [['status', '--jsn'], "llorch: unknown option '--jsn'", /^usage: llorch status/],
      [['submit', 'hi', '--temprature', '1'], "llorch: unknown option '--temprature'", /^usage: llorch submit/],
      [['frobnicate'], "llorch: unknown command 'frobnicate'", /^llorch — llama-orch command line/],
      [[], 'llorch: missing command', /^llorch — llama-orch command line/],
      [['reload', 'p1'], 'llorch: reload needs <model-ref>', /^usage: llorch reload/],
    ];
    const results = await Promise.all(cases.map(([args]) => llorch(args)));
    for (const [i, [args, first, usage]] of cases.entries()) {
      const r = results[i]!;
      expect(r.exitCode, args.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      const [line, blank, ...rest] = r.stderr.split('\n');
      expect(line).toBe(first);
      expect(blank).toBe('');
      expect(rest.join('\n')).toMatch(usage);
      expect(r.stderr).not.toMatch(STACK_LINE);
    }
  });

  it('a failure is one line on stderr, exit 1 (unreachable orchestratord, bad flag value, error envelope)', async () => {
    const f = await fixture([], {
      routes: {
        'POST /v2/pools/p9/drain': { status: 404, body: { code: 'NOT_FOUND', message: "pool 'p9' not found" } },
      },
    });
    const down = await llorch(['status', '--url', 'http://127.0.0.1:1']);
    expect(down.exitCode).toBe(1);
    expect(down.stderr).toMatch(/^llorch: cannot reach orchestratord at http:\/\/127\.0\.0\.1:1: .*ECONNREFUSED.*$/);
    const bad = await llorch(['drain', 'p1', '--deadline-ms', 'soon', '--url', f.url]);
    expect([bad.exitCode, bad.stderr]).toEqual([1, 'llorch: --deadline-ms must be an integer from 0 to 3600000']);
    const missing = await llorch(['drain', 'p9', '--url', f.url]);
    expect([missing.exitCode, missing.stderr]).toEqual([1, "llorch: NOT_FOUND: pool 'p9' not found"]);
  });
});

describe('llorch: --json and tables', () => {
  it('status, nodes and models --json print one JSON document each', async () => {
    const f = await fixture([], { routes: ROUTES, token: 'secret-token-0123456789' });
    const env = { LLORCH_URL: f.url, LLORCH_API_TOKEN: 'secret-token-0123456789' };
    const [status, nodes, models] = await Promise.all([
      llorch(['status', '--json'], env),
      llorch(['nodes', '--json'], env),
      llorch(['models', '--json'], env),
    ]);
    expect(status.exitCode, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toEqual({ nodes: [NODE], pools: [POOL], queued: 3, leased: 1 });
    expect(JSON.parse(nodes.stdout)).toEqual({ nodes: [NODE] });
    expect(JSON.parse(models.stdout)).toEqual({ models: [MODEL, LAZY] });
    expect(f.seen.every((l) => l.endsWith('auth=Bearer secret-token-0123456789'))).toBe(true);
  });

  it('models: each model once with its aliases, status, where it is loaded, idle since, pinned and why a load failed', async () => {
    const f = await fixture([], { routes: ROUTES });
    const r = await llorch(['models', '--url', f.url], {});
    expect(r.exitCode, r.stderr).toBe(0);
    const [head, , row, lazy] = r.stdout.split('\n').map((l) => l.trim().split(/\s{2,}/));
    expect(head).toEqual(['MODEL', 'ALIASES', 'STATUS', 'LOADED ON', 'IDLE SINCE', 'PINNED', 'LAST ERROR']);
    expect(row).toEqual(['synthetic:llama', 'synthetic', 'ready', 'n1/p1', '2026-01-01T00:00:05.000Z', 'yes']);
    expect(lazy).toEqual(['hf:org/repo/qwen.gguf', 'qwen', 'failed', '-', '-', 'no', 'sha256 mismatch']);
  });

  it('tasks: a table newest first across pages up to --limit; --json is the TaskList; filters reach the query', async () => {
    const f = await fixture([], { routes: ROUTES, token: 'secret-token-0123456789' });
    const env = { LLORCH_URL: f.url, LLORCH_API_TOKEN: 'secret-token-0123456789' };
    const [table, doc, ended] = await Promise.all([
      llorch(['tasks', '--limit', '2'], env),
      llorch(['tasks', '--limit', '2', '--json'], env),
      llorch(['tasks', '--state', 'ended'], env),
    ]);
    expect(table.exitCode, table.stderr).toBe(0);
    const rows = table.stdout.split('\n').map((l) => l.trim().split(/\s{2,}/));
    expect(rows[0]).toEqual(['TASK', 'STATE', 'MODEL', 'PRIORITY', 'POOL', 'TOKENS OUT', 'TTFT', 'AGE', 'OUTCOME']);
    expect(rows[2]).toEqual([
      'q-2',
      'queued',
      'synthetic',
      'batch',
      '-',
      '0',
      '-',
      expect.any(String),
      'queued, 0 ahead',
    ]);
    expect(rows[3]).toEqual([
      TASK,
      'ended',
      'synthetic',
      'interactive',
      'n1/p1',
      '31',
      '45 ms',
      expect.stringMatching(/^\d+d\d{2}h$/),
      'completed (eos)',
    ]);
    expect(rows).toHaveLength(4);
    expect(doc.exitCode, doc.stderr).toBe(0);
    expect(JSON.parse(doc.stdout)).toEqual({ tasks: [JSON.parse(JSON.stringify(QUEUED_TASK)), ENDED_TASK] });
    expect(ended.exitCode, ended.stderr).toBe(0);
    expect(ended.stdout.split('\n')).toHaveLength(3);
    expect(f.seen.every((l) => l.endsWith('auth=Bearer secret-token-0123456789'))).toBe(true);
  });

  it('task <id>: one fact a line; --json prints the TaskInfo as sent; an expired task is one line, exit 1', async () => {
    const f = await fixture([], { routes: ROUTES });
    const [view, doc, gone] = await Promise.all([
      llorch(['task', TASK, '--url', f.url]),
      llorch(['task', TASK, '--json', '--url', f.url]),
      llorch(['task', 'expired', '--url', f.url]),
    ]);
    expect(view.exitCode, view.stderr).toBe(0);
    expect(view.stdout).toMatch(new RegExp(`^task {9}${TASK}\nstate {8}ended\n`));
    for (const line of [
      /^model +synthetic \(synthetic:llama\)$/m,
      /^pool +n1\/p1 \(attempts 1\)$/m,
      /^outcome +completed, stop eos, finish reason stop$/m,
      /^usage +9 tokens in, 31 tokens out$/m,
      /^timings +queued 2 ms, first token 45 ms, total 900 ms$/m,
      /^ended +2026-01-01T00:00:00\.900Z \(.+ ago\)$/m,
    ])
      expect(view.stdout).toMatch(line);
    expect(JSON.parse(doc.stdout)).toEqual(ENDED_TASK);
    expect([gone.exitCode, gone.stdout, gone.stderr]).toEqual([1, '', "llorch: NOT_FOUND: task 'expired' not found"]);
  });

  it('tables are plain text when piped; colour only on a terminal without NO_COLOR', async () => {
    const f = await fixture([], { routes: ROUTES });
    const tty = (extra: string) =>
      execa('script', ['-qec', `${extra} ${process.execPath} ${MAIN} status --url ${f.url}`, '/dev/null'], {
        reject: false,
        env: { PATH: process.env.PATH ?? '' },
        extendEnv: false,
      });
    // `script` gives the command a pseudo-terminal
    const [piped, models, coloured, noColor] = await Promise.all([
      llorch(['status', '--url', f.url]),
      llorch(['models', '--url', f.url]),
      tty(''),
      tty('env NO_COLOR=1'),
    ]);
    expect(piped.stdout).toContain('p1    n1    ready');
    expect(piped.stdout).not.toContain('\u001b[');
    expect(models.stdout.split('\n')[2]).toMatch(/^synthetic:llama\s+synthetic\s+ready\s+n1\/p1\s+\S+\s+yes$/);
    expect(coloured.stdout).toContain('\u001b[32mready');
    expect(noColor.stdout).toContain('ready');
    expect(noColor.stdout).not.toContain('\u001b[');
  });

  it('submit --json prints only the final result document', async () => {
    const f = await fixture([
      formatSseFrame(1, { event: 'started', data: { queue_position: 0, predicted_start_ms: 5 } }),
      formatSseFrame(2, { event: 'token', data: { t: 'Hello', i: 0 } }),
      formatSseFrame(3, { event: 'token', data: { t: ' there', i: 1 } }),
      formatSseFrame(4, {
        event: 'end',
        data: {
          tokens_out: 2,
          decode_ms: 3,
          decode_time_ms: 3,
          pool_id: 'p1',
          node_id: 'n1',
          engine_version: 'b1',
          finish_reason: 'length',
        },
      }),
    ]);
    const r = await llorch(['submit', 'hi', '--json', '--url', f.url]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      task_id: TASK,
      text: 'Hello there',
      tokens_out: 2,
      canceled: false,
      interrupted: false,
      decode_ms: 3,
      finish_reason: 'length',
      node_id: 'n1',
      pool_id: 'p1',
      engine_version: 'b1',
    });
    expect(r.stderr).toBe('');
  });
});

describe('llorch: task and pool operations', () => {
  it('cancel, drain and reload send their requests and print one line', async () => {
    const op = (operation: string) => ({ status: 202, body: { pool_id: 'p1', operation, state: 'draining' } });
    const f = await fixture([], {
      routes: { 'POST /v2/pools/p1/drain': op('drain'), 'POST /v2/pools/p1/reload': op('reload') },
    });
    const cancel = await llorch(['cancel', 'task-7', '--url', f.url]);
    expect([cancel.exitCode, cancel.stdout]).toEqual([0, 'cancel requested for task task-7']);
    const drain = await llorch(['drain', 'p1', '--deadline-ms', '500', '--url', f.url]);
    expect(drain.exitCode, drain.stderr).toBe(0);
    expect(drain.stdout).toMatch(/^drain of pool p1 accepted \(state draining\)/);
    const reload = await llorch(['reload', 'p1', 'hf:org/repo/m.gguf', '--url', f.url]);
    expect(reload.exitCode, reload.stderr).toBe(0);
    expect(f.seen.map((l) => l.split(' auth=')[0])).toEqual([
      'POST /v2/tasks/task-7/cancel',
      'POST /v2/pools/p1/drain',
      'POST /v2/pools/p1/reload',
    ]);
    expect(f.bodies).toEqual([{ deadline_ms: 500 }, { new_model_ref: 'hf:org/repo/m.gguf', deadline_ms: 30_000 }]);
  });

  it('load and unload send their requests (model in the path, --node, --deadline-ms) and print one line; a refusal is one line, exit 1', async () => {
    const model = (status: string, pools: string[]) => ({
      status: 202,
      body: { ...LAZY, status, pools, last_error: undefined },
    });
    const path = '/v2/catalog/models/hf%3Aorg%2Frepo%2Fqwen.gguf';
    const f = await fixture([], {
      routes: {
        [`POST ${path}/load`]: model('loading', []),
        'POST /v2/catalog/models/qwen/unload': model('unloading', ['n1/qwen-abc123']),
        'POST /v2/catalog/models/pinned/unload': {
          status: 409,
          body: { code: 'CONFLICT', message: "model 'pinned' is pinned: 1 copy loaded, pin 1", retriable: false },
        },
      },
    });
    const load = await llorch(['load', 'hf:org/repo/qwen.gguf', '--node', 'gpu-2', '--url', f.url]);
    expect([load.exitCode, load.stdout]).toEqual([
      0,
      "load of model 'hf:org/repo/qwen.gguf' accepted (loading); `llorch models` shows its progress",
    ]);
    const unload = await llorch(['unload', 'qwen', '--deadline-ms', '500', '--url', f.url]);
    expect([unload.exitCode, unload.stdout]).toEqual([
      0,
      "unload of model 'hf:org/repo/qwen.gguf' accepted (unloading); `llorch models` shows its progress",
    ]);
    const pinned = await llorch(['unload', 'pinned', '--url', f.url]);
    expect([pinned.exitCode, pinned.stderr]).toEqual([
      1,
      "llorch: CONFLICT: model 'pinned' is pinned: 1 copy loaded, pin 1",
    ]);
    expect(f.seen.map((l) => l.split(' auth=')[0])).toEqual([
      `POST ${path}/load`,
      'POST /v2/catalog/models/qwen/unload',
      'POST /v2/catalog/models/pinned/unload',
    ]);
    expect(f.bodies).toEqual([{ node: 'gpu-2' }, { deadline_ms: 500 }, { deadline_ms: 30_000 }]);
  });

  it('Ctrl-C during submit cancels the task and exits 130', async () => {
    const f = await fixture(
      [
        formatSseFrame(1, { event: 'started', data: { queue_position: 0, predicted_start_ms: 5 } }),
        formatSseFrame(2, { event: 'token', data: { t: 'Once', i: 0 } }),
      ],
      { holdOpen: true },
    );
    const child = execa(process.execPath, [MAIN, 'submit', 'hi', '--url', f.url], {
      reject: false,
      env: { PATH: process.env.PATH ?? '' },
      extendEnv: false,
    });
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (c: Buffer) => {
        if (c.toString().includes('Once')) resolve();
      }),
    );
    child.kill('SIGINT');
    const r = await child;
    expect(r.exitCode).toBe(130);
    expect(f.seen.map((l) => l.split(' auth=')[0])).toContain(`POST /v2/tasks/${TASK}/cancel`);
    expect(r.stderr).toContain(`canceling task ${TASK}`);
    expect(r.stderr).toMatch(/^canceled: 1 tokens/m);
    expect(r.stderr).not.toMatch(STACK_LINE);
  });
});
