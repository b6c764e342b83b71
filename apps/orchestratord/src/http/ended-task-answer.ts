import {
  CORRELATION_ID_HEADER,
  SseFrameSchema,
  TokenEventSchema,
  type MetricsEvent,
  type SseFrame,
} from '@llama-orch/contracts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { V2_SSE } from '../streams/frame-encoder.js';
import { TaskEventStream } from '../streams/task-event-stream.js';
import { TaskStream } from '../streams/task-stream.js';
import type { StoredOutcome } from '../tasks/shared/end-writer.js';

/** Stands for the frames before the first token, which only the owner kept (queue metrics): one shared object. */
const PADDING: SseFrame = { event: 'metrics', data: { queue_depth: 0, on_time_probability: 1 } satisfies MetricsEvent };

/** What a replica reads back from a shared record's outcome (written by shared/end-writer.ts). */
const StoredReplaySchema = z.object({
  id: z.int().nonnegative().optional(),
  first_token: z.int().positive().optional(),
  tokens: z.array(TokenEventSchema).optional(),
});

/**
 * The frame log of an ended `/v2` task rebuilt from its shared record: `started`, padding up to the
 * first token's id, the tokens with the ids they had, the terminal frame with its id. Undefined when
 * the record cannot give the frames up to the terminal one with their ids (no tokens kept, a record
 * without the frame ids): then only the terminal frame can be told.
 */
export function replayFromRecord(
  outcome: StoredOutcome,
): { log: TaskStream | undefined; terminal: SseFrame; id: number | undefined } | undefined {
  const terminal = SseFrameSchema.safeParse({ event: outcome.event, data: outcome.data });
  const kept = StoredReplaySchema.safeParse(outcome);
  if (!terminal.success || !kept.success) return undefined;
  const { id, first_token: firstToken, tokens = [] } = kept.data;
  if (id === undefined) return { log: undefined, terminal: terminal.data, id };
  const log = new TaskStream();
  log.append({ event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } });
  const tokensStart = firstToken ?? id;
  while (log.length < tokensStart) log.append(PADDING);
  for (const t of tokens) log.appendToken(t);
  if (log.length !== id) return { log: undefined, terminal: terminal.data, id };
  log.append(terminal.data);
  return { log, terminal: terminal.data, id };
}

/**
 * Answers a stream request for an ended task from its record's outcome: the whole log after
 * `Last-Event-ID` when the record keeps it, else the terminal frame alone with its id (or the id
 * after `Last-Event-ID`, for a record without one or a client already past it). False when the
 * outcome is unreadable.
 */
export function answerEndedStream(req: FastifyRequest, reply: FastifyReply, outcome: StoredOutcome): boolean {
  const replay = replayFromRecord(outcome);
  if (replay === undefined) return false;
  const header = req.headers['last-event-id'];
  const raw =
    typeof header === 'string' ? header.trim() : (req.query as { last_event_id?: string } | undefined)?.last_event_id;
  const afterId = raw !== undefined && /^\d{1,9}$/.test(raw) ? Number(raw) : undefined;
  const headers = { [CORRELATION_ID_HEADER]: req.id };
  if (replay.log !== undefined) {
    reply.hijack();
    new TaskEventStream({
      res: reply.raw,
      stream: replay.log,
      encoder: V2_SSE,
      afterId,
      keepaliveMs: 15_000,
      headers,
      onAbandoned: () => undefined,
    });
    return true;
  }
  // A client whose ids ran ahead of the record's (see TaskEventStream) gets the id after its own.
  const frameId =
    replay.id !== undefined && (afterId === undefined || afterId <= replay.id) ? replay.id : (afterId ?? -1) + 1;
  void reply
    .code(200)
    .headers({
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      ...headers,
    })
    .send(V2_SSE.encode(frameId, replay.terminal));
  return true;
}
