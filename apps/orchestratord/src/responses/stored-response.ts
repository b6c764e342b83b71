import {
  ResponseInputItemSchema,
  SseFrameSchema,
  TokenEventSchema,
  type ResponseInputItem,
  type ResponsesRequest,
  type SseFrame,
  type TokenEvent,
} from '@llama-orch/contracts';
import { z } from 'zod';
import { InternalError } from '../errors.js';
import { TaskStream } from '../streams/task-stream.js';
import { ResponsesEventEncoder } from './event-encoder.js';
import type { ListedItem } from './input-items.js';
import { isFinalStatus, responseEnvelope, type ResponseIdentity, type Status } from './response-object.js';

const Json = z.record(z.string(), z.unknown());

/**
 * What the Responses door keeps of a stored response (the body of its `ResponseStore` entry, JSON):
 * the response object as `GET /v1/responses/{id}` answers it (its `status` says whether it is
 * final), what a later turn needs (the conversation it ran with; its output is in the object), the
 * input items as listed, the session its chain runs in, and for a background response, once ended,
 * the token and terminal frames its event stream is encoded from (a reader may stream it after the
 * task left every replica's table). Parsed on every read: another replica, or an older version of
 * this one, wrote it.
 */
export const StoredResponseSchema = z.object({
  v: z.literal(1),
  response: Json,
  task_id: z.string(),
  created_at: z.int(),
  /** The model as the client named it. */
  model: z.string(),
  /** The request without its `input`: the settings the object echoes. */
  settings: Json,
  background: z.boolean(),
  previous_response_id: z.string().optional(),
  /** The session the chain runs in, as the client would name it (admission puts it in the key's namespace). */
  session_id: z.string().optional(),
  /** Every item the task ran with before its output (the previous turns, then this input), instructions aside. */
  conversation: z.array(ResponseInputItemSchema),
  input_items: z.array(Json.and(z.object({ id: z.string() }))),
  replay: z.object({ tokens: z.array(TokenEventSchema), terminal: SseFrameSchema }).optional(),
});
export type StoredResponse = z.infer<typeof StoredResponseSchema>;

/** The record's JSON, as an entry's body. */
export function encodeStored(record: StoredResponse): string {
  return JSON.stringify(record);
}

/** An entry's body as a record; a body this version cannot read is an internal error (the store holds what we wrote). */
export function decodeStored(id: string, body: string): StoredResponse {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (err) {
    throw new InternalError(`stored response ${id} is not JSON`, { cause: err });
  }
  const parsed = StoredResponseSchema.safeParse(json);
  if (!parsed.success) throw new InternalError(`stored response ${id} is unreadable`, { cause: parsed.error });
  return parsed.data;
}

/** What a new stored response starts as (its object `queued` or in progress, no output yet). */
export interface NewStoredResponse {
  readonly who: ResponseIdentity;
  readonly background: boolean;
  readonly sessionId: string | undefined;
  readonly conversation: readonly ResponseInputItem[];
  readonly inputItems: readonly ListedItem[];
  readonly status: Status;
}

export function newStoredResponse(o: NewStoredResponse): StoredResponse {
  const { input: _input, ...settings } = o.who.request;
  const record: StoredResponse = {
    v: 1,
    response: responseEnvelope(o.who, o.status, [], null),
    task_id: o.who.taskId,
    created_at: o.who.createdAt,
    model: o.who.model,
    settings,
    background: o.background,
    conversation: [...o.conversation],
    input_items: [...o.inputItems],
  };
  if (o.who.previousResponseId !== undefined) record.previous_response_id = o.who.previousResponseId;
  if (o.sessionId !== undefined) record.session_id = o.sessionId;
  return record;
}

/** The identity the record's objects and events are made with (the same on every replica). */
export function whoOf(record: StoredResponse): ResponseIdentity {
  return {
    id: String(record.response.id),
    createdAt: record.created_at,
    model: record.model,
    request: { ...record.settings, input: [] } as unknown as ResponsesRequest,
    taskId: record.task_id,
    stored: { background: record.background },
    previousResponseId: record.previous_response_id,
  };
}

export function statusOfRecord(record: StoredResponse): Status {
  return record.response.status as Status;
}

export function isFinal(record: StoredResponse): boolean {
  return isFinalStatus(record.response.status);
}

/**
 * The response a task's frames make: its final object once the stream ended (undefined when it
 * holds no terminal frame: moved to another replica), encoded as a reader's events would be.
 */
export function finalFromFrames(who: ResponseIdentity, tokens: readonly TokenEvent[], terminal: SseFrame) {
  const encoder = new ResponsesEventEncoder(who);
  tokens.forEach((t, i) => encoder.encode(i, { event: 'token', data: t }));
  encoder.encode(tokens.length, terminal);
  return encoder.final;
}

/** The response while its task runs: `status` with the items its tokens made so far. */
export function liveSnapshot(who: ResponseIdentity, stream: TaskStream, status: Status): Record<string, unknown> {
  const encoder = new ResponsesEventEncoder(who);
  stream.tokenRecords().forEach((t, i) => encoder.encode(i, { event: 'token', data: t }));
  return encoder.snapshot(status);
}

/**
 * The response of a task this replica holds: final once its stream ended, else `queued` or
 * `in_progress` with the items so far.
 */
export function liveResponse(who: ResponseIdentity, stream: TaskStream, queued: boolean): Record<string, unknown> {
  const terminal = stream.terminal;
  const final = terminal === undefined ? undefined : finalFromFrames(who, stream.tokenRecords(), terminal);
  return final ?? liveSnapshot(who, stream, queued ? 'queued' : 'in_progress');
}

/**
 * The record once its task ended with `terminal`: the final object (`answer`: the one the door
 * rendered from the engine's single answer, else made from the frames) and, for a background
 * response, the frames its stream is read from later.
 */
export function endedRecord(
  record: StoredResponse,
  tokens: readonly TokenEvent[],
  terminal: SseFrame,
  answer?: Record<string, unknown>,
): StoredResponse {
  const response = answer ?? finalFromFrames(whoOf(record), tokens, terminal) ?? record.response;
  const ended: StoredResponse = { ...record, response };
  if (record.background) ended.replay = { tokens: [...tokens], terminal };
  return ended;
}

/**
 * The record of a response whose task is gone without a terminal frame anyone kept (its replica
 * died and nobody took it over before its record expired): `failed`, or `cancelled` when a cancel
 * asked for it, saying so.
 */
export function lostRecord(record: StoredResponse, status: 'failed' | 'cancelled'): StoredResponse {
  const error =
    status === 'failed'
      ? { code: 'server_error', message: `the task of response ${String(record.response.id)} was lost` }
      : null;
  return { ...record, response: responseEnvelope(whoOf(record), status, [], null, error) };
}

/**
 * The frame log an ended background response's events are encoded from: `started`, its tokens, its
 * terminal frame (a lost one's: a cancel's end, or an error saying it was lost).
 */
export function replayLog(record: StoredResponse): TaskStream {
  const log = new TaskStream();
  log.append({ event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } });
  for (const t of record.replay?.tokens ?? []) log.appendToken(t);
  const lost: SseFrame =
    record.response.status === 'cancelled'
      ? { event: 'end', data: { tokens_out: 0, decode_ms: 0, decode_time_ms: 0, stop_type: 'cancel', canceled: true } }
      : { event: 'error', data: { code: 'INTERNAL', message: 'the task of this response was lost', retriable: false } };
  log.append(record.replay?.terminal ?? lost);
  return log;
}
