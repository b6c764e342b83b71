// Process level: a replica that stalls (SIGSTOP, as a loaded machine or a long GC pause can) for
// longer than its 2 s owner lease, in the middle of a /v2 stream its client reads from it. Another
// replica finds the lease lapsed, takes the task over and re-attaches to the generation on the node,
// which ends the stalled replica's connection to it ("last attacher wins"). When the stalled
// replica runs again, its client must follow the task to its new owner (Last-Event-ID), not get
// `error WORKER_RESET "stream from node ended without an end or error event"` for a task that
// goes on under the new owner. `llorch up --replicas 3` with
// Debian's redis-server and HAProxy, the real daemons and llama-server (synthetic model).
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { cmdline, descendants } from './testing/proc.js';
import { readTask } from './testing/task-reader.js';
import { NO_EOS, replicaId, replicasScratch, startUp, until } from './testing/up-cluster.js';

const TOKEN = 'stall-test-token-0123456789abcdefgh';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

const scratch = replicasScratch('up-stall');

describe('llorch up --replicas 3: a replica stalled past its owner lease mid-stream', () => {
  it(
    'loses its running /v2 task to another replica, and its client follows the task there: no gap, no duplicate, one end, one generation',
    async () => {
      // 4,096 tokens per slot: the generation outlasts the stall and the takeover
      const up = await startUp(
        scratch.path,
        'stall',
        TOKEN,
        ['--replicas', '3', '--state-dir', join(scratch.path, 'stall-state')],
        (y) => y.replace(/^(\s+)ctx: 1024$/m, '$1ctx: 8192'),
      );
      const r1 = new RegExp(`replica r1\\s+(http://\\S+)`).exec(up.text())?.[1] ?? '';
      expect(r1).toMatch(/^http:/);
      const res = await fetch(`${r1}/v2/tasks`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          model_ref: 'synthetic',
          prompt: 'Write a long story',
          max_tokens: 4000,
          sampling: NO_EOS,
        }),
      });
      expect(res.status, await res.clone().text()).toBe(202);
      const long = ((await res.json()) as { task_id: string }).task_id;
      let tokens = 0;
      // read from r1, its owner, as a client the balancer sent there would; reconnect through the balancer
      const reading = readTask(up.base, long, headers, (f) => (tokens += f.event === 'token' ? 1 : 0), r1);
      await until('the task to stream 20 tokens', () => tokens >= 20, 60_000, up.text);
      const pid = descendants(up.llorch.pid!).find(
        (p) => replicaId(p) === 'r1' && cmdline(p).includes('orchestratord'),
      );
      expect(pid).toBeDefined();
      process.kill(pid!, 'SIGSTOP');
      const stoppedAt = Date.now();
      try {
        // its lease (2 s) lapses; the first survivor's sweep (every 100 ms) takes the task over and re-attaches
        await until(
          'a survivor to take the task over',
          () => up.text().includes(`Took over running task ${long}`),
          20_000,
          up.text,
        );
        await sleep(500);
      } finally {
        process.kill(pid!, 'SIGCONT');
      }
      const stalledMs = Date.now() - stoppedAt;
      const relevant = (): string =>
        up
          .text()
          .split('\n')
          .filter((l) => l.includes(long) || /Took over|handed off|Lost|lost|WARN|ERROR/.test(l))
          .join('\n');
      const read = await Promise.race([reading, sleep(120_000).then(() => undefined)]);
      expect(read, `the stream did not end within 120 s of the stall\n${relevant()}`).toBeDefined();
      const { frames, reconnects } = read!;
      const got = frames.filter((f) => f.event === 'token');
      const seen = frames
        .map((f) => `${f.id}:${f.event}${f.event === 'token' ? `#${String(f.data.i)}` : ''}`)
        .join(' ');
      expect(
        got.map((f) => f.data.i),
        `frames (id:event#i): ${seen}\n${relevant()}`,
      ).toEqual(got.map((_, i) => i));
      expect(new Set(frames.map((f) => f.id)).size).toBe(frames.length);
      const end = frames.at(-1)!;
      expect(end, `${JSON.stringify(end)}\n${relevant()}`).toMatchObject({
        event: 'end',
        data: { finish_reason: 'length' },
      });
      expect(reconnects).toBeGreaterThan(0);
      // r1 let the task go to its new owner instead of failing it, and nobody placed it again
      expect(up.text()).toMatch(new RegExp(`\\[orchestratord r1\\].*Task ${long} was taken over by replica`));
      expect(up.text().match(new RegExp(`Placed task ${long}`, 'g')) ?? []).toHaveLength(1);
      console.log(
        `replica r1 stalled ${stalledMs} ms (SIGSTOP) after ${tokens >= 20 ? 20 : tokens}+ tokens; its client followed the task (${got.length} tokens, ${reconnects} reconnects)`,
      );
      up.llorch.kill('SIGTERM');
      await Promise.race([up.llorch, sleep(60_000)]);
    },
    5 * 60_000,
  );
});
