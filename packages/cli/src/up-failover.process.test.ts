// Process level: a replica killed with SIGKILL loses nothing. `llorch up --replicas 3` with
// Debian's redis-server and HAProxy, real orchestratord replicas, the real pool-managerd and the
// real llama-server (synthetic model) from the shared test cache. /v2 clients read their task's
// event stream through the balancer and, when it breaks, reconnect with Last-Event-ID as an
// EventSource does.
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { cmdline, descendants } from './testing/proc.js';
import { readTask } from './testing/task-reader.js';
import { NO_EOS, replicaId, replicasScratch, startUp, until } from './testing/up-cluster.js';

const TOKEN = 'failover-test-token-0123456789abcd';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

const scratch = replicasScratch('up-failover');

async function admit(url: string, body: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${url}/v2/tasks`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ model_ref: 'synthetic', ...body }),
  });
  expect(res.status, await res.clone().text()).toBe(202);
  return ((await res.json()) as { task_id: string }).task_id;
}

describe('llorch up --replicas 3: a replica SIGKILLed mid-stream', () => {
  it(
    'its running /v2 stream resumes on another replica with no gap, no duplicate and one generation; its queued tasks run elsewhere in priority order',
    async () => {
      // 2,048 tokens per slot (cpu-dev.yaml has 512): both slots stay busy past the takeover even on a fast machine
      const up = await startUp(
        scratch.path,
        'failover',
        TOKEN,
        ['--replicas', '3', '--state-dir', join(scratch.path, 'failover-state')],
        (y) => y.replace(/^(\s+)ctx: 1024$/m, '$1ctx: 4096'),
      );
      const replicaUrl = (id: string): string =>
        new RegExp(`replica ${id}\\s+(http://\\S+)`).exec(up.text())?.[1] ?? '';
      const [r1, r2] = [replicaUrl('r1'), replicaUrl('r2')];
      expect(r1).toMatch(/^http:/);
      // both slots busy: a long task owned by r1 (the one to resume) and one owned by r2
      const long = await admit(r1, { prompt: 'Write a long story', max_tokens: 2000, sampling: NO_EOS });
      const other = await admit(r2, { prompt: 'Write a story', max_tokens: 2000, sampling: NO_EOS });
      await until(
        'both long tasks to stream',
        () => up.text().includes(`Streaming task ${long}`) && up.text().includes(`Streaming task ${other}`),
        60_000,
        up.text,
      );
      // queued behind them, owned by r1: a batch task first, then an interactive one
      const batch = await admit(r1, { prompt: 'Write a haiku', max_tokens: 24, priority: 'batch' });
      const inter = await admit(r1, { prompt: 'Write a haiku', max_tokens: 24, priority: 'interactive' });
      let killedAt = 0;
      let resumedAt = 0;
      let tokensBeforeKill = 0;
      const reads = [long, other, batch, inter].map((id) =>
        readTask(up.base, id, headers, (f) => {
          if (id !== long || f.event !== 'token') return;
          if (killedAt === 0) tokensBeforeKill += 1;
          else if (resumedAt === 0) resumedAt = Date.now();
        }),
      );
      await until('the long task to stream 20 tokens', () => tokensBeforeKill >= 20, 60_000, up.text);
      const pid = descendants(up.llorch.pid!).find(
        (p) => replicaId(p) === 'r1' && cmdline(p).includes('orchestratord'),
      );
      expect(pid).toBeDefined();
      process.kill(pid!, 'SIGKILL');
      killedAt = Date.now();
      let tookOverAt = 0;
      void until(
        'a survivor to take the long task over',
        () => (tookOverAt ||= up.text().includes(`Took over running task ${long}`) ? Date.now() : 0) > 0,
        60_000,
        up.text,
      ).catch(() => undefined);
      const all = await Promise.race([Promise.all(reads), sleep(90_000).then(() => undefined)]);
      const relevant = (): string =>
        up
          .text()
          .split('\n')
          .filter(
            (l) =>
              [long, other, batch, inter].some((id) => l.includes(id)) ||
              /Took over|orphan|exited|restarted|WARN|ERROR/.test(l),
          )
          .join('\n');
      expect(all, `the four streams did not end within 90 s of the kill\n${relevant()}`).toBeDefined();
      const [longRead, otherRead, batchRead, interRead] = all as [
        Awaited<(typeof reads)[number]>,
        Awaited<(typeof reads)[number]>,
        Awaited<(typeof reads)[number]>,
        Awaited<(typeof reads)[number]>,
      ];

      // the resumed stream: every token index once, in order, one end that counts them all
      const tokens = longRead.frames.filter((f) => f.event === 'token');
      const seen = longRead.frames
        .map((f) => `${f.id}:${f.event}${f.event === 'token' ? `#${String(f.data.i)}` : ''}`)
        .join(' ');
      expect(
        tokens.map((f) => f.data.i),
        `frames (id:event#i): ${seen}\n${relevant()}`,
      ).toEqual(tokens.map((_, i) => i));
      expect(new Set(longRead.frames.map((f) => f.id)).size).toBe(longRead.frames.length);
      const end = longRead.frames.at(-1)!;
      expect(end, `${JSON.stringify(end)}\n${relevant()}`).toMatchObject({
        event: 'end',
        data: { finish_reason: 'length' },
      });
      // the engine counts tokens, the stream pieces of text: a piece may hold more than one token
      expect(end.data.tokens_out).toBeGreaterThanOrEqual(tokens.length);
      expect(tokens.length).toBeGreaterThan(tokensBeforeKill);
      expect(longRead.reconnects).toBeGreaterThan(0);
      // one generation: a survivor re-attached to the node's dispatch, none placed the task again
      expect(up.text()).toMatch(new RegExp(`Took over running task ${long}`));
      expect(up.text().match(new RegExp(`Placed task ${long}`, 'g')) ?? []).toHaveLength(1);
      const poolUrl = /\[pool-managerd\] listening\s+\(url=(http:\/\/[^)\s]+)\)/.exec(up.text())?.[1];
      const metrics = await (await fetch(`${poolUrl}/metrics`, { headers })).text();
      expect(metrics).toMatch(/llorch_dispatch_reattach_total\{[^}]*outcome="reattached"[^}]*\} 1/);
      // the others: complete, each ended once
      for (const r of [otherRead, batchRead, interRead]) {
        const terminals = r.frames.filter((f) => f.event === 'end' || f.event === 'error');
        expect(
          terminals.map((f) => f.event),
          `${JSON.stringify(terminals)}\n${relevant()}`,
        ).toEqual(['end']);
      }
      // the dead replica's queued tasks were taken over (by the survivors or the restarted r1) and placed, the interactive one first
      for (const id of [batch, inter]) expect(up.text()).toMatch(new RegExp(`Took over queued task ${id}`));
      // log lines leave a daemon in batches (up to 100 ms): the tasks' ends can reach their clients first
      const placedLines = () =>
        [...up.text().matchAll(/\[orchestratord (r\d)\] Placed task ([0-9a-f-]{36})/g)].filter(
          (m) => m[2] === batch || m[2] === inter,
        );
      await until('the queued tasks to be placed', () => placedLines().length === 2, 10_000, relevant);
      const placed = placedLines();
      expect(placed.map((m) => m[2])).toEqual([inter, batch]);
      console.log(
        `replica r1 SIGKILLed after ${tokensBeforeKill} tokens of a ${tokens.length}-token stream: taken over ${tookOverAt - killedAt} ms later, the client's next token ${resumedAt - killedAt} ms later ` +
          `(${longRead.reconnects} reconnects; owner lease 2 s = 2 heartbeat intervals); its 2 queued tasks ran on ${placed.map((m) => m[1]).join(', ')}`,
      );
      up.llorch.kill('SIGTERM');
      await Promise.race([up.llorch, sleep(60_000)]);
    },
    4 * 60_000,
  );
});
