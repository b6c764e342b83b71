import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import {
  CORRELATION_ID_HEADER,
  ERROR_STATUS,
  needsBackoffHeaders,
  resolveTaskRequest,
  type ErrorEvent,
  type TaskRequestBody,
} from '@llama-orch/contracts';
import { backoffHeaders, DEFAULT_BACKOFF_MS } from '@llama-orch/daemon-support';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { modelNotFound } from '../catalog/model-not-found.js';
import { respondWithAnswer } from '../openai/answer-response.js';
import type { ResponseIdentity } from '../openai/chunks.js';
import type { Delivery, TaskRecord } from '../tasks/task-record.js';
import type { AppServices } from './app-services.js';
import { withPriorityCeiling } from './client-keys.js';
import { abandonTask } from './task-streams.js';

/**
 * What every front door (`/v1` chat and completions, Anthropic messages, OpenAI responses) hands
 * to the one admission path: the model name asked for, the task body a `POST /v2/tasks` would
 * carry, and whether the answer streams. The door renders; admission, queue, lanes, placement,
 * affinity, deadlines, cancel, metrics and log lines are the /v2 ones.
 */
export interface DoorCall {
  readonly model: string;
  readonly task: TaskRequestBody;
  readonly stream: boolean;
  /** How its output goes out. @default `stream` when streamed, else `answer` (`events`: a background Response, re-encodable from its frames) */
  readonly delivery?: Delivery | undefined;
}

/**
 * Admits a door's task: a model neither in the catalog nor listed by any pool is the client's
 * mistake (404 MODEL_NOT_FOUND, `param: model`), refused before the body's other fields are read;
 * one whose pools are all down or offline, or a catalog model loaded nowhere, is the cluster's
 * (the admission's 503 MODEL_NOT_AVAILABLE). `door` is on every log line of the task, so operators tell the doors'
 * traffic apart in one log. Not streamed = an `answer` task (the engine answers once, no token
 * crosses the daemons).
 */
export async function admitDoorTask(
  services: AppServices,
  req: FastifyRequest,
  call: DoorCall,
  door: string,
): Promise<TaskRecord> {
  if (
    services.registry.poolsForModel(call.model).length === 0 &&
    (await services.catalog.get(call.model)) === undefined
  )
    throw modelNotFound(call.model);
  const request = resolveTaskRequest(call.task, { deadlineMs: services.config.default_deadline_ms, newId: randomUUID });
  const delivery = call.delivery ?? (call.stream ? 'stream' : 'answer');
  const admitted = await services.tasks.admit(withPriorityCeiling(request, req), {
    log: req.log.child({ door }),
    correlationId: req.id,
    clientKey: req.principal?.name,
    delivery,
    door,
    traceParent: req.traceContext,
  });
  const id = admitted.task_id;
  const task = services.tasks.get(id);
  if (task === undefined || !('delivery' in task)) throw new Error(`admitted task ${id} is not in the table`);
  return task;
}

/** JSON text as the answer of a hijacked door response. */
export function sendJsonText(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Readonly<Record<string, string>>,
): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}

/** A task's failure as a door's answer: its ErrorEnvelope status, `Retry-After` on 429/503, `body` in the door's shape. */
export function sendRefusal(res: ServerResponse, err: ErrorEvent, correlationId: string, body: unknown): void {
  const headers: Record<string, string> = needsBackoffHeaders(err.code) ? backoffHeaders(DEFAULT_BACKOFF_MS) : {};
  headers[CORRELATION_ID_HEADER] = correlationId;
  sendJsonText(res, ERROR_STATUS[err.code], JSON.stringify(body), headers);
}

/**
 * Answers a non-streamed door request from its `answer` task (`openai/answer-response.ts`): the
 * engine's one answer rendered by `render` (default: the /v1 body), or the task's failure through
 * `refuse`. A client that leaves first abandons the task when nobody else reads it (cancel).
 */
export function answerOnce(
  services: AppServices,
  req: FastifyRequest,
  reply: FastifyReply,
  task: TaskRecord,
  o: {
    who: ResponseIdentity;
    render?: (body: Record<string, unknown>) => string;
    refuse: (err: ErrorEvent) => void;
    onNoAnswer?: () => void;
  },
): void {
  reply.hijack();
  const abandon = abandonTask(services, req, task);
  respondWithAnswer({
    res: reply.raw,
    task,
    who: o.who,
    ...(o.render !== undefined ? { render: o.render } : {}),
    ...(o.onNoAnswer !== undefined ? { onNoAnswer: o.onNoAnswer } : {}),
    // respondWithAnswer has unsubscribed when it calls this: the task is abandoned when nobody else reads it.
    onClientGone: () => {
      if (task.stream.subscriberCount === 0) abandon();
    },
    sendAnswer: (text) => sendJsonText(reply.raw, 200, text, { [CORRELATION_ID_HEADER]: req.id }),
    sendRefusal: o.refuse,
  });
}
