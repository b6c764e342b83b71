// Process level: `llorch tasks` and `llorch task` as a user runs them (the built CLI) against the
// real orchestratord that `llorch up` starts, with the real pool-managerd and llama-server
// (synthetic model) from the shared test cache: tasks sent with `llorch submit` are listed and
// shown as orchestratord recorded them; an unknown id is one line, exit 1.
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { TaskInfoSchema, TaskListSchema, type TaskInfo } from '@llama-orch/contracts';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_MAIN, startUp } from './testing/up-cluster.js';

const TOKEN = 'tasks-process-token-0123456789';
const PKG = join(CLI_MAIN, '..', '..');

let dir = '';
beforeAll(async () => {
  execFileSync('npx', ['tsc', '--build', PKG], { cwd: PKG, stdio: 'inherit' });
  dir = await mkdtemp(join(tmpdir(), 'llorch-tasks-'));
}, 120_000);
afterAll(async () => {
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

function llorch(args: string[], env: Record<string, string>) {
  return execa(process.execPath, [CLI_MAIN, ...args], {
    reject: false,
    env: { PATH: process.env.PATH ?? '', ...env },
    extendEnv: false,
  });
}

describe('llorch tasks and llorch task against a real orchestratord', () => {
  it(
    'lists the tasks llorch submit sent, newest first, with their filters; shows one record; an unknown id is NOT_FOUND, exit 1',
    async () => {
      const up = await startUp(dir, 'tasks', TOKEN, []);
      expect(up.text()).toContain('llama-orch is up');
      const env = { LLORCH_URL: up.base, LLORCH_API_TOKEN: TOKEN };
      // two tasks, one after the other: a chat turn (interactive) then a raw prompt (batch)
      const submitted: Array<{ task_id: string; tokens_out: number; node_id?: string; pool_id?: string }> = [];
      for (const args of [
        ['submit', 'Write a haiku', '--max-tokens', '6', '--seed', '1'],
        ['submit', '--raw', 'Once upon a time', '--max-tokens', '4', '--batch', '--seed', '1'],
      ]) {
        const r = await llorch([...args, '--json'], env);
        expect(r.exitCode, r.stderr).toBe(0);
        submitted.push(JSON.parse(r.stdout) as (typeof submitted)[number]);
        await sleep(5); // distinct admission times: the list's order is by admission
      }
      const [chat, raw] = submitted as [(typeof submitted)[0], (typeof submitted)[0]];

      // --json: the TaskList, newest first, each record as orchestratord keeps it
      const listed = await llorch(['tasks', '--json'], env);
      expect(listed.exitCode, listed.stderr).toBe(0);
      const list = TaskListSchema.parse(JSON.parse(listed.stdout));
      expect(list.tasks.map((t) => t.task_id)).toEqual([raw.task_id, chat.task_id]);
      expect(list.next_cursor).toBeUndefined();
      const [rawInfo, chatInfo] = list.tasks as [TaskInfo, TaskInfo];
      expect(chatInfo).toMatchObject({
        state: 'ended',
        model: 'synthetic',
        priority: 'interactive',
        workload: 'chat',
        door: 'v2',
        outcome: { result: 'completed' },
        usage: { tokens_out: chat.tokens_out },
        pool_id: chat.pool_id,
        node_id: chat.node_id,
      });
      expect(rawInfo).toMatchObject({ state: 'ended', priority: 'batch', workload: 'completion' });
      expect(rawInfo.usage.tokens_out).toBe(raw.tokens_out);

      // the filters reach orchestratord; --limit follows the pages up to N
      const [batch, queued, recent, one] = await Promise.all([
        llorch(['tasks', '--priority', 'batch', '--json'], env),
        llorch(['tasks', '--state', 'queued', '--json'], env),
        llorch(['tasks', '--since', '1h', '--state', 'ended'], env),
        llorch(['tasks', '--limit', '1', '--json'], env),
      ]);
      expect(TaskListSchema.parse(JSON.parse(batch.stdout)).tasks.map((t) => t.task_id)).toEqual([raw.task_id]);
      expect(JSON.parse(queued.stdout)).toEqual({ tasks: [] });
      const firstPage = TaskListSchema.parse(JSON.parse(one.stdout));
      expect(firstPage.tasks.map((t) => t.task_id)).toEqual([raw.task_id]);
      expect(firstPage.next_cursor).toBeDefined();
      // the table: a header, a rule, one row per task
      expect(recent.exitCode, recent.stderr).toBe(0);
      const rows = recent.stdout.split('\n').map((l) => l.trim().split(/\s{2,}/));
      expect(rows[0]).toEqual(['TASK', 'STATE', 'MODEL', 'PRIORITY', 'POOL', 'TOKENS OUT', 'TTFT', 'AGE', 'OUTCOME']);
      expect(rows).toHaveLength(4);
      expect(rows[3]!.slice(0, 6)).toEqual([
        chat.task_id,
        'ended',
        'synthetic',
        'interactive',
        `${chat.node_id}/${chat.pool_id}`,
        String(chat.tokens_out),
      ]);
      expect(rows[3]![8]).toMatch(/^completed\b/);

      // one record: --json as orchestratord sent it, else one fact a line
      const [doc, view, unknown] = await Promise.all([
        llorch(['task', chat.task_id, '--json'], env),
        llorch(['task', chat.task_id], env),
        llorch(['task', '00000000-0000-4000-8000-00000000dead'], env),
      ]);
      expect(doc.exitCode, doc.stderr).toBe(0);
      expect(TaskInfoSchema.parse(JSON.parse(doc.stdout))).toEqual(chatInfo);
      expect(view.exitCode, view.stderr).toBe(0);
      expect(view.stdout).toMatch(new RegExp(`^task +${chat.task_id}$`, 'm'));
      expect(view.stdout).toMatch(/^state +ended$/m);
      expect(view.stdout).toMatch(new RegExp(`^pool +${chat.node_id}/${chat.pool_id} \\(attempts 1\\)$`, 'm'));
      expect(view.stdout).toMatch(new RegExp(`^usage +.*\\b${chat.tokens_out} tokens out$`, 'm'));
      expect(view.stdout).toMatch(/^timings +queued .+, first token .+, total .+$/m);
      expect(unknown.exitCode).toBe(1);
      expect(unknown.stdout).toBe('');
      expect(unknown.stderr).toMatch(/^llorch: NOT_FOUND: task '00000000-0000-4000-8000-00000000dead' not found/);
      expect(unknown.stderr.split('\n')).toHaveLength(1);

      up.llorch.kill('SIGTERM');
      const stopped = await Promise.race([up.llorch, sleep(60_000).then(() => undefined)]);
      expect(stopped?.exitCode, up.text()).toBe(0);
    },
    5 * 60_000,
  );
});
