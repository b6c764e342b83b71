import { randomUUID } from 'node:crypto';
import {
  CORRELATION_ID_HEADER,
  ResponseInputItemsQuerySchema,
  ResponseRetrieveQuerySchema,
  type ErrorEvent,
  type OpenAiError,
  type ResponsesRequest,
} from '@llama-orch/contracts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { InvalidParamsError } from '../../errors.js';
import { openAiErrorBody } from '../../openai/openai-errors.js';
import { sessionIdFor } from '../../openai/session-key.js';
import { ResponsesEventEncoder } from '../../responses/event-encoder.js';
import { inputItemsPage, listedInputItems, outputAsInput } from '../../responses/input-items.js';
import { inputItemsOf, parseResponsesRequest, responsesCall } from '../../responses/request-mapping.js';
import { responseFromChat, type ResponseIdentity } from '../../responses/response-object.js';
import { ResponseRecords, untilEnded, type LoadedResponse } from '../../responses/response-records.js';
import { answerStored } from '../../responses/stored-answer.js';
import { previousResponseNotFound, responseNotFound } from '../../responses/responses-errors.js';
import {
  endedRecord,
  isFinal,
  liveResponse,
  lostRecord,
  newStoredResponse,
  replayLog,
  whoOf,
  type StoredResponse,
} from '../../responses/stored-response.js';
import { nameUuid } from '../../sessions/session-ids.js';
import type { RetainedTask, TaskRecord } from '../../tasks/task-record.js';
import type { ServicesOptions } from '../app-services.js';
import { admitDoorTask, answerOnce, sendJsonText, sendRefusal } from '../door-tasks.js';
import { mayAccess } from '../task-access.js';
import { abandonTask, serveTaskEvents } from '../task-streams.js';

const ResponseParams = z.object({ id: z.string().min(1).max(256) });
/** How long a cancel waits for the task's terminal frame before it answers, ms. */
const CANCEL_WAIT_MS = 5000;

/** Where a stored response's current state is: its final record, its task here, or answered by the replica holding it. */
type Located =
  | { readonly kind: 'final'; readonly loaded: LoadedResponse }
  | { readonly kind: 'local'; readonly task: TaskRecord | RetainedTask }
  | { readonly kind: 'answered' }
  | { readonly kind: 'lost'; readonly loaded: LoadedResponse };

/**
 * The OpenAI Responses door. `POST /v1/responses` translates each request to a chat task
 * (`responses/request-mapping.ts`) admitted through the same path as `/v1/chat/completions` (auth
 * and keys, rate limits, lanes, placement, cancel on disconnect, metrics, correlated logs; `door:
 * responses` on its log lines). Streams are the task's token records through
 * `ResponsesEventEncoder`; a non-streamed response is the engine's one chat answer rendered by
 * `responseFromChat`. Errors take OpenAI's shape (a /v1 path: http/error-handler.ts).
 *
 * Stored responses (`store` not false, the default): the record (responses/stored-response.ts) is
 * written when the task ends; `previous_response_id` puts its conversation and output before the
 * input and keeps the chain in one session (prompt-cache affinity). A background response is
 * admitted with the `/v2` events delivery and `detached` (no reader cancels it), written `queued`
 * at once and watched to its end by the replica that holds it; reads of it while it runs are
 * answered from that task here, or passed to the replica holding it (http/task-owner-proxy.ts).
 * `GET`/`DELETE /v1/responses/{id}`, `…/input_items` and `…/cancel` see only what the key created
 * (operator keys: everything); anything else is the 404 of an unknown id.
 */
export const responsesRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  const records = new ResponseRecords({
    store: services.store.responses,
    retentionMs: services.config.task_retention_ms,
    log: app.log.child({ component: 'responses' }),
  });
  const unwatch = records.watchTakenOver(services.tasks);
  app.addHook('onClose', async () => unwatch());

  const refuse = (reply: FastifyReply, status: number, body: OpenAiError): FastifyReply =>
    reply.code(status).send(body);

  /** The stored response `id` if the caller may see it. */
  async function accessible(req: FastifyRequest, id: string): Promise<LoadedResponse | undefined> {
    const loaded = await records.load(id);
    return loaded !== undefined && mayAccess(req.principal, loaded.clientKey) ? loaded : undefined;
  }

  app.post('/v1/responses', async (req, reply) => {
    const raw = req.body as { user?: unknown; safety_identifier?: unknown; prompt_cache_key?: unknown } | null;
    const key = [raw?.user, raw?.safety_identifier, raw?.prompt_cache_key].find(
      (v): v is string => typeof v === 'string',
    );
    const body = parseResponsesRequest(req.body);
    const clientSession = sessionIdFor(req.headers['x-session-id'], key);
    const previousId = body.previous_response_id ?? undefined;
    let previous: StoredResponse | undefined;
    if (previousId !== undefined) {
      const loaded = await accessible(req, previousId);
      if (loaded === undefined) return refuse(reply, 404, previousResponseNotFound(previousId));
      previous = await records.settled(loaded, services.tasks.get(loaded.record.task_id)?.stream);
      if (previous === undefined)
        throw new InvalidParamsError(
          `previous_response_id: response ${previousId} is still ${String(loaded.record.response.status)}; continue it once it has ended`,
          { param: 'previous_response_id' },
        );
    }
    if (body.store === false && previous === undefined) return stateless(req, reply, body, clientSession);
    return stored(req, reply, body, clientSession, previous);
  });

  /** `store: false` without a previous response: nothing kept, exactly as before stored responses. */
  async function stateless(
    req: FastifyRequest,
    reply: FastifyReply,
    body: ResponsesRequest,
    sessionId: string | undefined,
  ): Promise<FastifyReply> {
    const call = responsesCall(body, sessionId);
    const task = await admitDoorTask(services, req, call, 'responses');
    const who: ResponseIdentity = {
      id: `resp_${task.id}`,
      createdAt: Math.floor(services.clock.now() / 1000),
      model: call.model,
      request: call.request,
      taskId: task.id,
    };
    answerForeground(req, reply, task, call.stream, who);
    return reply;
  }

  /**
   * A stored response, or one continuing a stored one: its id is known before admission, so the
   * chain's session (unless the client names one) is derived from its first response's id.
   */
  async function stored(
    req: FastifyRequest,
    reply: FastifyReply,
    body: ResponsesRequest,
    clientSession: string | undefined,
    previous: StoredResponse | undefined,
  ): Promise<FastifyReply> {
    const taskId = randomUUID();
    const id = `resp_${taskId}`;
    const sessionId = clientSession ?? previous?.session_id ?? nameUuid(`response:${id}`);
    const history =
      previous === undefined ? [] : [...previous.conversation, ...outputAsInput(previous.response.output as unknown[])];
    const call = responsesCall(body, sessionId, { history, taskId });
    const background = body.background === true;
    const keep = body.store !== false;
    const task = await admitDoorTask(
      services,
      req,
      { ...call, delivery: background ? 'events' : undefined },
      'responses',
    );
    const who: ResponseIdentity = {
      id,
      createdAt: Math.floor(services.clock.now() / 1000),
      model: call.model,
      request: call.request,
      taskId: task.id,
      stored: keep ? { background } : undefined,
      previousResponseId: previous === undefined ? undefined : String(previous.response.id),
    };
    if (!keep) {
      answerForeground(req, reply, task, call.stream, who);
      return reply;
    }
    const clientKey = req.principal?.name;
    const input = inputItemsOf(body.input);
    const record = newStoredResponse({
      who,
      background,
      sessionId,
      conversation: [...history, ...input],
      inputItems: listedInputItems(input, task.id.replaceAll('-', '')),
      status: background ? 'queued' : 'in_progress',
    });
    const onRefused = refusal(req, reply);
    if (!background && !call.stream) {
      reply.hijack();
      answerStored({
        res: reply.raw,
        task,
        who,
        record,
        clientKey,
        records,
        sendAnswer: (text) => sendJsonText(reply.raw, 200, text, { [CORRELATION_ID_HEADER]: req.id }),
        sendRefusal: onRefused,
        abandon: abandonTask(services, req, task),
      });
      return reply;
    }
    // Streamed or background: readable from its first event (or the create's answer) on.
    if (background) task.detached = true;
    try {
      await records.write(record, clientKey);
    } catch (err) {
      services.tasks.cancel(task.id, 'client');
      throw err;
    }
    if (!background) {
      serveTaskEvents(services, req, reply, task, {
        encoder: new ResponsesEventEncoder(who),
        lazyHead: true,
        onRefused,
      });
      // After the reader's own close listener, which decides whether the task is abandoned.
      reply.raw.once('close', () => records.finishWhenEnded(task.stream, record, clientKey, { onlyIfKept: true }));
      return reply;
    }
    records.finishWhenEnded(task.stream, record, clientKey);
    if (call.stream) {
      serveTaskEvents(services, req, reply, task, { encoder: new ResponsesEventEncoder(who) });
      return reply;
    }
    // As OpenAI's API answers a background create: queued, whatever the queue did meanwhile.
    return reply.send(record.response);
  }

  const refusal =
    (req: FastifyRequest, reply: FastifyReply) =>
    (err: ErrorEvent): void =>
      sendRefusal(reply.raw, err, req.id, openAiErrorBody(err));

  /** A response kept nowhere: streamed, or the engine's one answer. */
  function answerForeground(
    req: FastifyRequest,
    reply: FastifyReply,
    task: TaskRecord,
    stream: boolean,
    who: ResponseIdentity,
  ): void {
    const onRefused = refusal(req, reply);
    if (stream)
      serveTaskEvents(services, req, reply, task, {
        encoder: new ResponsesEventEncoder(who),
        lazyHead: true,
        onRefused,
      });
    else
      answerOnce(services, req, reply, task, {
        who: { kind: 'chat', id: who.id, created: who.createdAt, model: who.model },
        render: (chat) => JSON.stringify(responseFromChat(chat, who)),
        refuse: onRefused,
      });
  }

  /**
   * Where the response's state is now: its final record; its task on this replica; passed to the
   * replica that holds its task (that one answered); or, when no replica holds it any more and the
   * record is still not final, lost.
   */
  async function locate(req: FastifyRequest, reply: FastifyReply, loaded: LoadedResponse): Promise<Located> {
    if (isFinal(loaded.record)) return { kind: 'final', loaded };
    const taskId = loaded.record.task_id;
    let task = services.tasks.get(taskId);
    if (task === undefined && services.owners !== undefined) {
      const forwarded = await services.owners.forward(req, reply, taskId, { fromRecord: false });
      if (forwarded === 'answered') return { kind: 'answered' };
      if (forwarded === 'taken') task = services.tasks.get(taskId);
    }
    if (task !== undefined) {
      // A background task is watched here from now on (one taken over from a replica that died
      // ends here). Never a foreground one: a watcher would count as its reader, and its client
      // leaving would no longer cancel it; its own request writes its end.
      if (loaded.record.background) records.finishWhenEnded(task.stream, loaded.record, loaded.clientKey);
      return { kind: 'local', task };
    }
    // Its task ended and the final write landed meanwhile, or it is gone.
    const again = (await records.load(String(loaded.record.response.id))) ?? loaded;
    return isFinal(again.record) ? { kind: 'final', loaded: again } : { kind: 'lost', loaded: again };
  }

  app.get(
    '/v1/responses/:id',
    { exposeHeadRoute: false, schema: { params: ResponseParams, querystring: ResponseRetrieveQuerySchema } },
    async (req, reply) => {
      const { id } = req.params;
      const loaded = await accessible(req, id);
      if (loaded === undefined) return refuse(reply, 404, responseNotFound(id));
      const stream = req.query.stream === 'true';
      if (stream && !loaded.record.background)
        throw new InvalidParamsError('stream: only a response created with background: true can be streamed', {
          param: 'stream',
        });
      const at = await locate(req, reply, loaded);
      if (at.kind === 'answered') return reply;
      const who = whoOf(loaded.record);
      if (at.kind === 'lost') {
        const lost = lostRecord(at.loaded.record, 'failed');
        await records.write(lost, at.loaded.clientKey);
        if (!stream) return reply.send(lost.response);
        return replay(req, reply, lost, req.query.starting_after);
      }
      if (at.kind === 'final')
        return stream
          ? replay(req, reply, at.loaded.record, req.query.starting_after)
          : reply.send(at.loaded.record.response);
      if (!stream) return reply.send(liveResponse(who, at.task.stream, at.task.state === 'queued'));
      serveTaskEvents(services, req, reply, at.task, {
        encoder: new ResponsesEventEncoder(who, { startingAfter: req.query.starting_after }),
      });
      return reply;
    },
  );

  /** An ended background response's events, from its record (after `starting_after`). */
  function replay(
    req: FastifyRequest,
    reply: FastifyReply,
    record: StoredResponse,
    startingAfter?: number,
  ): FastifyReply {
    const ended: RetainedTask = { id: record.task_id, stream: replayLog(record), state: 'ended', clientKey: undefined };
    serveTaskEvents(services, req, reply, ended, {
      encoder: new ResponsesEventEncoder(whoOf(record), { startingAfter }),
    });
    return reply;
  }

  app.post('/v1/responses/:id/cancel', { schema: { params: ResponseParams } }, async (req, reply) => {
    const { id } = req.params;
    const loaded = await accessible(req, id);
    if (loaded === undefined) return refuse(reply, 404, responseNotFound(id));
    if (!loaded.record.background)
      throw new InvalidParamsError(`only a response created with background: true can be cancelled; ${id} was not`);
    const at = await locate(req, reply, loaded);
    if (at.kind === 'answered') return reply;
    // Cancelling an ended response is no error: the answer is the response as it ended.
    if (at.kind === 'final') return reply.send(at.loaded.record.response);
    if (at.kind === 'lost') {
      const lost = lostRecord(at.loaded.record, 'cancelled');
      await records.write(lost, at.loaded.clientKey);
      return reply.send(lost.response);
    }
    const { task } = at;
    if (task.state !== 'ended') services.tasks.cancel(task.id, 'client');
    await untilEnded(task.stream, CANCEL_WAIT_MS);
    const terminal = task.stream.terminal;
    const who = whoOf(loaded.record);
    if (terminal === undefined) return reply.send(liveResponse(who, task.stream, false));
    return reply.send(endedRecord(loaded.record, task.stream.tokenRecords(), terminal).response);
  });

  app.get(
    '/v1/responses/:id/input_items',
    { schema: { params: ResponseParams, querystring: ResponseInputItemsQuerySchema } },
    async (req, reply) => {
      const { id } = req.params;
      const loaded = await accessible(req, id);
      if (loaded === undefined) return refuse(reply, 404, responseNotFound(id));
      return reply.send(inputItemsPage(loaded.record.input_items, req.query));
    },
  );

  app.delete('/v1/responses/:id', { schema: { params: ResponseParams } }, async (req, reply) => {
    const { id } = req.params;
    const loaded = await accessible(req, id);
    if (loaded === undefined) return refuse(reply, 404, responseNotFound(id));
    // A background task still running here stops with its response; on another replica it runs to
    // its end, and its final write finds the entry gone and adds nothing.
    const task = services.tasks.get(loaded.record.task_id);
    if (loaded.record.background && task !== undefined && task.state !== 'ended')
      services.tasks.cancel(task.id, 'client');
    await records.delete(id);
    return reply.send({ id, object: 'response', deleted: true });
  });
};
