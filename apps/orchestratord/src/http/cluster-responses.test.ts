// Stored and background Responses across 2 replicas on a real redis-server, through the official
// `openai` client: a response stored through one replica is read, listed, continued and deleted
// through the other (the Redis ResponseStore); a background response running on one replica is
// polled, streamed (resumed after a sequence number) and cancelled through the other, which passes
// those requests to the replica holding the task (http/task-owner-proxy.ts). Keys as in
// replica-harness.ts: dan and cat clients, ann an operator.
import { randomUUID } from 'node:crypto';
import { resolveTaskRequest, TaskRequestSchema } from '@llama-orch/contracts';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { encodeStored, newStoredResponse } from '../responses/stored-response.js';
import { leaveTask } from '../testing/leftover-tasks.js';
import { ANN, CAT, DAN, fixtureCluster, replicaHarness, until, type Replica } from '../testing/replica-harness.js';

type Event = OpenAI.Responses.ResponseStreamEvent;

describe('stored and background Responses across replicas', () => {
  const h = replicaHarness();
  const urlOf = (r: Replica) => `http://127.0.0.1:${(r.app.server.address() as { port: number }).port}`;
  const client = (r: Replica, key = DAN) =>
    new OpenAI({ baseURL: `${urlOf(r)}/v1`, apiKey: key, maxRetries: 0, timeout: 20_000 });

  async function collect(stream: AsyncIterable<Event>): Promise<Event[]> {
    const events: Event[] = [];
    for await (const e of stream) events.push(e);
    return events;
  }

  async function poll(c: OpenAI, id: string, statuses: string[]): Promise<OpenAI.Responses.Response> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const r = await c.responses.retrieve(id);
      if (statuses.includes(String(r.status))) return r;
      if (Date.now() > deadline) throw new Error(`response ${id} stayed ${String(r.status)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  const rejected = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: unknown) => e,
    );

  it(
    'stored through one replica, read, listed, continued and deleted through the other; another key gets 404 there',
    { timeout: 30_000 },
    async () => {
      const { replicas } = await fixtureCluster(h, 'responses-stored:', 2);
      const [a, b] = replicas as [Replica, Replica];
      const first = await client(a).responses.create({
        model: 'm',
        instructions: 'Be brief.',
        input: 'one two three',
        max_output_tokens: 3,
      });
      expect(first).toMatchObject({ status: 'incomplete', store: true });
      expect(await client(b).responses.retrieve(first.id)).toEqual(await client(a).responses.retrieve(first.id));
      expect((await client(b).responses.inputItems.list(first.id)).data).toMatchObject([
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'one two three' }] },
      ]);
      expect(await rejected(client(b, CAT).responses.retrieve(first.id))).toBeInstanceOf(OpenAI.NotFoundError);
      expect(await client(b, ANN).responses.retrieve(first.id)).toMatchObject({ id: first.id });

      const second = await client(b).responses.create({
        model: 'm',
        instructions: 'Be brief.',
        previous_response_id: first.id,
        input: 'four',
        max_output_tokens: 3,
      });
      expect(second.previous_response_id).toBe(first.id);
      expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens + first.usage!.output_tokens);
      expect((await client(a).responses.retrieve(second.id)).usage).toEqual(second.usage);

      // Streamed through A, read and continued through B the moment its last event came: the same
      // response, whether B finds the final record or passes the read to A, which ran it.
      const events = await collect(
        await client(a).responses.create({ model: 'm', input: 'five six', max_output_tokens: 2, stream: true }),
      );
      const streamed = (events.at(-1) as OpenAI.Responses.ResponseIncompleteEvent).response;
      const read = await client(b).responses.retrieve(streamed.id);
      expect({ ...read, output_text: undefined }).toEqual({ ...streamed, output_text: undefined });
      const after = await client(b).responses.create({
        model: 'm',
        previous_response_id: streamed.id,
        input: 'seven',
        max_output_tokens: 1,
      });
      expect(after.usage!.input_tokens).toBeGreaterThan(streamed.usage!.input_tokens);

      await client(b).responses.delete(first.id);
      expect(await rejected(client(a).responses.retrieve(first.id))).toBeInstanceOf(OpenAI.NotFoundError);
      const chained = await rejected(
        client(a).responses.create({ model: 'm', previous_response_id: first.id, input: 'x' }),
      );
      expect((chained as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({
        code: 'previous_response_not_found',
      });
    },
  );

  it(
    'a background response running on one replica is polled, streamed (resumed) and cancelled through the other',
    { timeout: 40_000 },
    async () => {
      const { replicas, node } = await fixtureCluster(h, 'responses-background:', 2, { tokenIntervalMs: 25 });
      const [a, b] = replicas as [Replica, Replica];
      const created = await client(a).responses.create({
        model: 'm',
        input: 'slowly',
        background: true,
        max_output_tokens: 24,
      });
      expect(created).toMatchObject({ status: 'queued', background: true });
      // B holds no task: its reads go to A, which holds it
      expect(b.app.services.tasks.get(created.id.slice('resp_'.length))).toBeUndefined();
      const running = await poll(client(b), created.id, ['in_progress']);
      expect(running.background).toBe(true);

      const seen: Event[] = [];
      for await (const e of await client(b).responses.retrieve(created.id, { stream: true })) {
        seen.push(e);
        if (e.type === 'response.output_text.delta' && seen.length >= 6) break;
      }
      const after = seen.at(-1)!.sequence_number;
      const rest = await collect(
        await client(b).responses.retrieve(created.id, { stream: true, starting_after: after }),
      );
      expect(rest[0]?.sequence_number).toBe(after + 1);
      expect(rest.at(-1)?.type).toBe('response.incomplete');
      const done = await poll(client(b), created.id, ['incomplete']);
      expect(done.usage?.output_tokens).toBe(24);
      expect(await client(a).responses.retrieve(created.id)).toEqual(done);
      // once ended, its stream comes from the record, the same events through either replica
      const replayed = await collect(await client(b).responses.retrieve(created.id, { stream: true }));
      expect(replayed.slice(after + 1)).toEqual(rest);

      const long = await client(a).responses.create({
        model: 'm',
        input: 'long',
        background: true,
        max_output_tokens: 2000,
      });
      await poll(client(b), long.id, ['in_progress']);
      expect(await rejected(client(b, CAT).responses.cancel(long.id))).toBeInstanceOf(OpenAI.NotFoundError);
      const cancelled = await client(b).responses.cancel(long.id);
      expect(cancelled).toMatchObject({ id: long.id, status: 'cancelled' });
      expect(await poll(client(a), long.id, ['cancelled'])).toMatchObject({ status: 'cancelled' });
      expect(node.aborts.length).toBeGreaterThanOrEqual(1);
    },
  );

  it(
    'a background response whose replica died: taken over by another when its lease lapses, run to its end unread, written there',
    { timeout: 30_000 },
    async () => {
      const { replicas } = await fixtureCluster(h, 'responses-orphan:', 1);
      const [a] = replicas as [Replica];
      // What a replica killed right after a background create leaves: the queued record in the
      // ResponseStore and the task (door responses, events delivery) under a lease nobody renews.
      const taskId = randomUUID();
      const id = `resp_${taskId}`;
      const body = { model: 'm', input: 'orphaned', background: true, max_output_tokens: 4 };
      const record = newStoredResponse({
        who: { id, createdAt: 1, model: 'm', request: body, taskId, stored: { background: true } },
        background: true,
        sessionId: undefined,
        conversation: [{ role: 'user', content: 'orphaned' }],
        inputItems: [],
        status: 'queued',
      });
      await a.store.responses.put({ id, clientKey: 'dan', body: encodeStored(record) }, 60_000);
      const request = resolveTaskRequest(
        TaskRequestSchema.parse({
          task_id: taskId,
          model_ref: 'm',
          workload: 'chat',
          messages: [{ role: 'user', content: [{ type: 'text', text: 'orphaned' }] }],
          max_tokens: 4,
        }),
        { deadlineMs: 60_000, newId: randomUUID },
      );
      await leaveTask(a.store, {
        id: taskId,
        owner: 'dead',
        record: {
          model_ref: 'm',
          priority: request.priority,
          session_id: request.session_id,
          admitted_at: Date.now(),
          owner_url: 'http://127.0.0.1:9',
          request,
          correlation_id: 'c',
          client_key: 'dan',
          delivery: 'events',
          door: 'responses',
        },
        lane: 'interactive',
        ownerTtlMs: 300,
      });
      await until(
        async () => (await a.store.tasks.get(taskId))?.state === 'ended',
        'the orphan to run to its end',
        15_000,
      );
      // Nobody read it while it ran: the replica that ran it wrote its record at the end.
      await until(
        async () => (await a.store.responses.get(id))?.body.includes('"status":"incomplete"') === true,
        'its final record',
      );
      const done = await client(a).responses.retrieve(id);
      expect(done).toMatchObject({ status: 'incomplete', background: true, usage: { output_tokens: 4 } });
      expect(done.output_text).toBe('tok0 tok1 tok2 tok3 ');
    },
  );
});
