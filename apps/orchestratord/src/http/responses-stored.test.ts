// Stored and background Responses (issue 42) driven by the official `openai` client against a
// listening orchestratord with client keys (alice and carol) and an operator key (ops), and a FIXTURE
// pool-managerd node behind it: its tokens say `tok0 tok1 …`, its prompt tokens are the prompt's
// words and its prompt cache keeps one prompt per slot, so usage tells what a turn was sent. The
// replica case is cluster-responses.test.ts; the real engine's is test-harness/e2e-haiku.
import { createHash } from 'node:crypto';
import { OrchestratorConfigSchema } from '@llama-orch/contracts';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import type { FastifyRequest } from 'fastify';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { buildApp, type OrchdApp } from '../app.js';
import { HB_MS } from '../testing/openai-cluster.js';
import { captureLogger, waitFor } from '../testing/test-helpers.js';
import { createUpstreamDispatchers } from '../upstream/dispatchers.js';
import type { AppServices } from './app-services.js';
import { loadCredentials } from './credentials.js';
import { abandonTask } from './task-streams.js';

const NODE = 'node-token-0123456789abcdef';
const ALICE = 'alice-key-0123456789abcdef';
const CAROL = 'carol-key-0123456789abcdef';
const OPS = 'ops-key-0123456789abcdef';
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const KEYS = `keys:
  - name: alice
    key_sha256: ${sha(ALICE)}
  - name: carol
    key_sha256: ${sha(CAROL)}
  - name: ops
    key_sha256: ${sha(OPS)}
    role: operator
`;

type Event = OpenAI.Responses.ResponseStreamEvent;

interface Harness {
  url: string;
  app: OrchdApp;
  node: FixturePoolManager;
  logs: ReturnType<typeof captureLogger>;
  client(key?: string): OpenAI;
}

describe('stored and background Responses through the openai client', () => {
  const closers: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  /** orchestratord with the keys, listening, and a FIXTURE node with one pool `p` of model `m` heartbeating to it. */
  async function start(o: { tokenIntervalMs?: number; slots?: number } = {}): Promise<Harness> {
    const config = OrchestratorConfigSchema.parse({
      node_token: NODE,
      keys_file: '/keys.yaml',
      heartbeat_interval_ms: HB_MS,
      default_deadline_ms: 60_000,
    });
    const credentials = loadCredentials({ config, env: {}, readFile: () => KEYS });
    const upstream = createUpstreamDispatchers();
    closers.push(() => upstream.close());
    const logs = captureLogger();
    const app = await buildApp(
      { logger: logs.logger, upstream: upstream.http1, upstreamH2c: upstream.h2c, credentials },
      config,
      {
        tickMs: 20,
      },
    );
    closers.push(() => app.close());
    await app.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const node = await FixturePoolManager.start({
      nodeId: 'n1',
      pools: [{ pool_id: 'p', models: ['m'], slots: o.slots ?? 2 }],
      token: NODE,
      tokenIntervalMs: o.tokenIntervalMs ?? 2,
    });
    closers.push(() => node.close());
    await node.startHeartbeats(url, HB_MS);
    await waitFor(() => app.services.registry.poolsForModel('m').length > 0, 5000, 'the node online');
    const client = (key = ALICE) => new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 20_000 });
    return { url, app, node, logs, client };
  }

  const text = (r: { output: OpenAI.Responses.ResponseOutputItem[] }): string =>
    r.output
      .flatMap((item) => (item.type === 'message' ? item.content : []))
      .map((part) => (part.type === 'output_text' ? part.text : ''))
      .join('');

  async function collect(stream: AsyncIterable<Event>): Promise<Event[]> {
    const events: Event[] = [];
    for await (const e of stream) events.push(e);
    return events;
  }

  /** Polls `retrieve` until the response has one of `statuses`. */
  async function poll(client: OpenAI, id: string, statuses: string[]): Promise<OpenAI.Responses.Response> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const r = await client.responses.retrieve(id);
      if (statuses.includes(String(r.status))) return r;
      if (Date.now() > deadline) throw new Error(`response ${id} stayed ${String(r.status)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  const notFound = async (p: Promise<unknown>): Promise<Record<string, unknown>> => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    return (err as InstanceType<typeof OpenAI.NotFoundError>).error as Record<string, unknown>;
  };

  it('stores by default: retrieve, input_items, previous_response_id in one session (input tokens include the first turn), delete then 404', async () => {
    const h = await start();
    const client = h.client();
    const first = await client.responses.create({
      model: 'm',
      instructions: 'Answer briefly.',
      input: 'What rhymes with moon?',
      max_output_tokens: 3,
    });
    expect(first).toMatchObject({ object: 'response', status: 'incomplete', store: true, background: false });
    expect(first.id).toMatch(/^resp_[0-9a-f-]{36}$/);
    expect(text(first)).toBe('tok0 tok1 tok2 ');
    expect(await client.responses.retrieve(first.id)).toEqual(first);

    const items = await client.responses.inputItems.list(first.id);
    expect(items.data).toEqual([
      {
        id: expect.stringMatching(/^msg_/),
        type: 'message',
        role: 'user',
        status: 'completed',
        content: [{ type: 'input_text', text: 'What rhymes with moon?' }],
      },
    ]);

    const second = await client.responses.create({
      model: 'm',
      instructions: 'Answer briefly.',
      previous_response_id: first.id,
      input: [{ role: 'user', content: 'And with sun?' }],
      max_output_tokens: 3,
    });
    expect(second).toMatchObject({ status: 'incomplete', previous_response_id: first.id, store: true });
    // The engine was sent the first turn, its answer, then the new input, after this request's instructions.
    const sent = h.node.dispatches.at(-1)?.body.messages;
    expect(sent).toEqual([
      { role: 'system', content: 'Answer briefly.' },
      { role: 'user', content: [{ type: 'text', text: 'What rhymes with moon?' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'tok0 tok1 tok2 ' }] },
      { role: 'user', content: [{ type: 'text', text: 'And with sun?' }] },
    ]);
    const u1 = first.usage!;
    const u2 = second.usage!;
    expect(u2.input_tokens).toBeGreaterThan(u1.input_tokens + u1.output_tokens);
    // One session for the chain: the same pool, whose prompt cache still held the first turn.
    expect(u2.input_tokens_details.cached_tokens).toBeGreaterThan(0);
    const sessions = h.logs
      .records()
      .filter((r) => r.msg === 'task admitted')
      .map((r) => r.session_id);
    expect(sessions).toHaveLength(2);
    expect(sessions[0]).toBe(sessions[1]);

    // The third turn reaches back through both.
    const third = await client.responses.create({
      model: 'm',
      previous_response_id: second.id,
      input: 'Thanks',
      max_output_tokens: 2,
    });
    expect(third.usage!.input_tokens).toBeGreaterThan(u2.input_tokens);
    // (the instructions of a previous turn are not carried over, as OpenAI's API says)
    expect(h.node.dispatches.at(-1)?.body.messages).toHaveLength(5);

    // Deleted: gone for every route, and for a continuation; later turns keep their own conversation.
    await client.responses.delete(first.id);
    const raw = await request(`${h.url}/v1/responses/${second.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${ALICE}` },
    });
    expect(await raw.body.json()).toEqual({ id: second.id, object: 'response', deleted: true });
    expect(await notFound(client.responses.retrieve(first.id))).toEqual({
      message: `Response with id '${first.id}' not found.`,
      type: 'invalid_request_error',
      param: null,
      code: null,
    });
    await notFound(client.responses.inputItems.list(first.id));
    await notFound(client.responses.delete(first.id));
    expect(
      await notFound(client.responses.create({ model: 'm', previous_response_id: first.id, input: 'again' })),
    ).toEqual({
      message: `Previous response with id '${first.id}' not found.`,
      type: 'invalid_request_error',
      param: 'previous_response_id',
      code: 'previous_response_not_found',
    });
    expect((await client.responses.retrieve(third.id)).status).toBe('incomplete');
  });

  it('input_items: OpenAI’s list with limit, order (desc by default), after and before; the client pages through them', async () => {
    const h = await start();
    const client = h.client();
    const r = await client.responses.create({
      model: 'm',
      input: [
        { role: 'user', content: 'one' },
        { role: 'assistant', content: 'two' },
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'three' },
        { role: 'user', content: [{ type: 'input_text', text: 'four' }] },
      ],
      max_output_tokens: 1,
    });
    const all = await client.responses.inputItems.list(r.id, { order: 'asc' });
    expect(all.data.map((i) => i.type)).toEqual([
      'message',
      'message',
      'function_call',
      'function_call_output',
      'message',
    ]);
    expect(all.data[1]).toMatchObject({ role: 'assistant', content: [{ type: 'output_text', text: 'two' }] });
    expect(all.data[2]).toMatchObject({ call_id: 'c1', name: 'f', arguments: '{}', status: 'completed' });
    expect(all.data[3]).toMatchObject({ call_id: 'c1', output: 'three' });
    const ids = all.data.map((i) => i.id);
    expect(new Set(ids).size).toBe(5);

    const page = await client.responses.inputItems.list(r.id, { limit: 2 });
    expect(page.data.map((i) => i.id)).toEqual([ids[4], ids[3]]);
    const body = await (
      await request(`${h.url}/v1/responses/${r.id}/input_items?limit=2&order=asc&after=${ids[0]}`, {
        headers: { authorization: `Bearer ${ALICE}` },
      })
    ).body.json();
    expect(body).toEqual({
      object: 'list',
      data: [all.data[1], all.data[2]],
      first_id: ids[1],
      last_id: ids[2],
      has_more: true,
    });
    const before = (await (
      await request(`${h.url}/v1/responses/${r.id}/input_items?order=asc&before=${ids[2]}`, {
        headers: { authorization: `Bearer ${ALICE}` },
      })
    ).body.json()) as { data: Array<{ id: string }> };
    expect(before.data.map((i) => i.id)).toEqual([ids[0], ids[1]]);
    // Auto-pagination follows `after` = the page's last id.
    const paged: string[] = [];
    for await (const item of client.responses.inputItems.list(r.id, { limit: 2, order: 'asc' })) paged.push(item.id!);
    expect(paged).toEqual(ids);
    const bad = await client.responses.inputItems.list(r.id, { after: 'msg_nope' }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it('store: false is the stateless response it was: nothing kept, nothing to continue', async () => {
    const h = await start();
    const client = h.client();
    const r = await client.responses.create({ model: 'm', input: 'hi', store: false, max_output_tokens: 2 });
    expect(r).toMatchObject({ status: 'incomplete', store: false, previous_response_id: null });
    expect('background' in r).toBe(false);
    await notFound(client.responses.retrieve(r.id));
    expect((await notFound(client.responses.create({ model: 'm', previous_response_id: r.id, input: 'x' }))).code).toBe(
      'previous_response_not_found',
    );
    // background needs store
    const refused = await client.responses
      .create({ model: 'm', input: 'hi', store: false, background: true })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ param: 'background' });
  });

  it('a streamed stored response is retrievable as its last event said', async () => {
    const h = await start();
    const client = h.client();
    const events = await collect(
      await client.responses.create({ model: 'm', input: 'stream me', max_output_tokens: 3, stream: true }),
    );
    const last = events.at(-1)!;
    expect(last.type).toBe('response.incomplete');
    const final = (last as OpenAI.Responses.ResponseIncompleteEvent).response;
    expect(final).toMatchObject({ store: true, background: false });
    // (the client adds `output_text` to what it retrieves, not to an event's response)
    expect(await client.responses.retrieve(final.id)).toEqual({ ...final, output_text: text(final) });
    // Only background responses stream again.
    const refused = await client.responses.retrieve(final.id, { stream: true }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it('background: answered queued at once, polled through in_progress to its end; its events stream again, resumed after a sequence number', async () => {
    const h = await start({ tokenIntervalMs: 25 });
    const client = h.client();
    const created = await client.responses.create({
      model: 'm',
      input: 'take your time',
      background: true,
      max_output_tokens: 12,
    });
    expect(created).toMatchObject({ status: 'queued', background: true, store: true, output: [] });
    const running = await poll(client, created.id, ['in_progress']);
    expect(running.usage).toBeNull();
    const done = await poll(client, created.id, ['incomplete']);
    expect(text(done)).toBe(Array.from({ length: 12 }, (_, i) => `tok${i} `).join(''));
    expect(done.usage).toMatchObject({ output_tokens: 12 });

    // The whole stream from its record, then from after a sequence number: the same events, the same numbers.
    const all = await collect(await client.responses.retrieve(created.id, { stream: true }));
    expect(all.slice(0, 3).map((e) => e.type)).toEqual(['response.created', 'response.queued', 'response.in_progress']);
    expect(all.map((e) => e.sequence_number)).toEqual(all.map((_, i) => i));
    expect({ ...(all.at(-1) as OpenAI.Responses.ResponseIncompleteEvent).response, output_text: text(done) }).toEqual(
      done,
    );
    const tail = await collect(await client.responses.retrieve(created.id, { stream: true, starting_after: 7 }));
    expect(tail).toEqual(all.slice(8));
  });

  it('background stream read live: a reader that leaves does not cancel it; a reconnect with starting_after gets only the later events', async () => {
    const h = await start({ tokenIntervalMs: 30 });
    const client = h.client();
    const stream = await client.responses.create({
      model: 'm',
      input: 'go',
      background: true,
      stream: true,
      max_output_tokens: 20,
    });
    const seen: Event[] = [];
    for await (const e of stream) {
      seen.push(e);
      if (e.type === 'response.output_text.delta' && seen.length >= 8) break; // leaves: the iterator aborts the request
    }
    const id = (seen[0] as OpenAI.Responses.ResponseCreatedEvent).response.id;
    expect((seen[0] as OpenAI.Responses.ResponseCreatedEvent).response.status).toBe('queued');
    const after = seen.at(-1)!.sequence_number;
    const rest = await collect(await client.responses.retrieve(id, { stream: true, starting_after: after }));
    expect(rest[0]?.sequence_number).toBe(after + 1);
    const last = rest.at(-1) as OpenAI.Responses.ResponseIncompleteEvent;
    expect(last.type).toBe('response.incomplete');
    const deltas = [...seen, ...rest]
      .filter((e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === 'response.output_text.delta')
      .map((e) => e.delta)
      .join('');
    expect(deltas).toBe(text(last.response));
    expect(last.response.usage?.output_tokens).toBe(20);
    expect(h.node.aborts).toHaveLength(0);
  });

  it('background cancel: the task stops (its slot freed) and the response says cancelled; cancelling again answers the same; a foreground one is no background', async () => {
    const h = await start({ tokenIntervalMs: 40 });
    const client = h.client();
    const created = await client.responses.create({
      model: 'm',
      input: 'long',
      background: true,
      max_output_tokens: 2000,
    });
    await poll(client, created.id, ['in_progress']);
    await waitFor(() => h.node.dispatches.length === 1, 5000, 'the dispatch');
    const cancelled = await client.responses.cancel(created.id);
    expect(cancelled).toMatchObject({ id: created.id, status: 'cancelled', background: true });
    await waitFor(() => h.node.aborts.length === 1, 5000, 'the engine request aborted');
    expect(await client.responses.retrieve(created.id)).toMatchObject({ status: 'cancelled' });
    expect(await client.responses.cancel(created.id)).toMatchObject({ status: 'cancelled' });
    const events = await collect(await client.responses.retrieve(created.id, { stream: true }));
    expect(events.at(-1)?.type).toBe('response.cancelled');

    const foreground = await client.responses.create({ model: 'm', input: 'x', max_output_tokens: 1 });
    const refused = await client.responses.cancel(foreground.id).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it('key isolation: another client key gets the 404 of an unknown id on every route; an operator key reads and cancels', async () => {
    const h = await start({ tokenIntervalMs: 40 });
    const alice = h.client(ALICE);
    const carol = h.client(CAROL);
    const ops = h.client(OPS);
    const stored = await alice.responses.create({ model: 'm', input: 'mine', max_output_tokens: 1 });
    const bg = await alice.responses.create({
      model: 'm',
      input: 'mine too',
      background: true,
      max_output_tokens: 2000,
    });
    const unknown = await notFound(carol.responses.retrieve('resp_00000000-0000-4000-8000-000000000000'));
    for (const id of [stored.id, bg.id]) {
      const err = await notFound(carol.responses.retrieve(id));
      expect({ ...err, message: undefined }).toEqual({ ...unknown, message: undefined });
      await notFound(carol.responses.retrieve(id, { stream: true }));
      await notFound(carol.responses.inputItems.list(id));
      await notFound(carol.responses.cancel(id));
      await notFound(carol.responses.delete(id));
      expect((await notFound(carol.responses.create({ model: 'm', previous_response_id: id, input: 'x' }))).code).toBe(
        'previous_response_not_found',
      );
    }
    // carol changed nothing
    expect((await alice.responses.retrieve(stored.id)).status).toBe('incomplete');
    expect(['queued', 'in_progress']).toContain((await alice.responses.retrieve(bg.id)).status);

    expect(await ops.responses.retrieve(stored.id)).toEqual(await alice.responses.retrieve(stored.id));
    expect((await ops.responses.inputItems.list(stored.id)).data).toHaveLength(1);
    expect(await ops.responses.cancel(bg.id)).toMatchObject({ status: 'cancelled' });
    expect(await alice.responses.retrieve(bg.id)).toMatchObject({ status: 'cancelled' });
  });
});

describe('the last reader of a task leaving', () => {
  it('cancels it (disconnect = cancel), unless the task is detached (a background Response)', () => {
    const cancelled: string[] = [];
    const services = {
      owners: undefined,
      tasks: { cancel: (id: string) => cancelled.push(id) },
    } as unknown as AppServices;
    const req = { log: captureLogger().logger } as unknown as FastifyRequest;
    const task = (id: string, detached: boolean) =>
      ({ id, delivery: 'events', detached }) as unknown as Parameters<typeof abandonTask>[2];
    abandonTask(services, req, task('foreground', false))();
    abandonTask(services, req, task('background', true))();
    expect(cancelled).toEqual(['foreground']);
  });
});
