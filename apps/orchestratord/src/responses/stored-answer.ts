import type { ServerResponse } from 'node:http';
import type { ErrorEvent } from '@llama-orch/contracts';
import { respondWithAnswer, type AnswerTask } from '../openai/answer-response.js';
import type { ResponseRecords } from './response-records.js';
import { responseFromChat, type ResponseIdentity } from './response-object.js';
import { endedRecord, type StoredResponse } from './stored-response.js';

export interface StoredAnswerOptions {
  readonly res: ServerResponse;
  /** The admitted `answer` task. */
  readonly task: AnswerTask;
  readonly who: ResponseIdentity;
  /** The record to write (its final form once the answer came). */
  readonly record: StoredResponse;
  readonly clientKey: string | undefined;
  readonly records: ResponseRecords;
  /** Sends the 200 answer body (JSON text); statuses are written in `http/`. */
  readonly sendAnswer: (text: string) => void;
  /** Sends the task's failure (its status, OpenAI's shape). */
  readonly sendRefusal: (err: ErrorEvent) => void;
  /** The client left before the answer and nobody else reads the task: cancel it. */
  readonly abandon: () => void;
}

/**
 * A stored response answered once (not streamed): the engine's answer rendered by
 * `responseFromChat`, written to the store **before** the client gets it, so that a client that
 * retrieves or continues it right after finds its final record on any replica (a failed write is
 * logged, and the answer sent all the same). A task that ends otherwise (its client left: cancelled)
 * is written when it ends; one that failed is not (its client got an error status, never the id).
 */
export function answerStored(o: StoredAnswerOptions): void {
  const { res, task, who } = o;
  let answered: Record<string, unknown> | undefined;
  respondWithAnswer({
    res,
    task,
    who: { kind: 'chat', id: who.id, created: who.createdAt, model: who.model },
    render: (chat) => {
      answered = responseFromChat(chat, who);
      return JSON.stringify(answered);
    },
    // respondWithAnswer has unsubscribed when it calls this: abandoned when nobody else reads it.
    onClientGone: () => {
      if (task.stream.subscriberCount === 0) o.abandon();
    },
    sendAnswer: (text) => {
      const terminal = task.stream.terminal;
      if (terminal === undefined) return o.sendAnswer(text);
      void o.records
        .writeLogged(endedRecord(o.record, [], terminal, answered), o.clientKey, false)
        .then(() => o.sendAnswer(text));
    },
    sendRefusal: o.sendRefusal,
  });
  // Registered after respondWithAnswer's own close listener, which decides whether the task is abandoned.
  res.once('close', () => {
    if (answered === undefined)
      o.records.finishWhenEnded(task.stream, o.record, o.clientKey, { skipRefused: true, onlyIfKept: false });
  });
}
