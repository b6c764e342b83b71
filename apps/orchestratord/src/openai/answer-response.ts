import type { ServerResponse } from 'node:http';
import { ERROR_STATUS, needsBackoffHeaders, type ErrorEvent } from '@llama-orch/contracts';
import type { TaskStream } from '../streams/task-stream.js';
import { ResponseCollector, type ResponseIdentity } from './chunks.js';
import { openAiErrorBody } from './openai-errors.js';

/** What the responder reads of an `answer` task (the task record; `openai/` does not import `tasks/`). */
export interface AnswerTask {
  readonly stream: TaskStream;
  /** The node's answer once it came; taken (set undefined) when sent. */
  answer: { readonly body: Record<string, unknown> } | undefined;
  readonly placement: { readonly engine_version: string } | undefined;
}

export interface AnswerResponseOptions {
  res: ServerResponse;
  /** The admitted `answer` task. */
  task: AnswerTask;
  who: ResponseIdentity;
  /** Extra response headers (correlation id). */
  headers: Readonly<Record<string, string>>;
  /** The client went away before the answer was sent (the caller cancels the task). */
  onClientGone: () => void;
}

/**
 * The engine's answer body in the door's shape: `id`, `created` and `model` (the name the client
 * asked for) set on the body in place, so every other member keeps the engine's order and value
 * (choices, message or text, tool calls, logprobs, usage, timings, system_fingerprint), then
 * serialised once. The body is the task's and is consumed here. Performance notes: engine answer
 * passed through.
 */
export function answerText(body: Record<string, unknown>, who: ResponseIdentity): string {
  body.id = who.id;
  body.created = who.created;
  body.model = who.model;
  return JSON.stringify(body);
}

/**
 * Answers a non-streamed /v1 request from its `answer` task (no token frames on this path): waits
 * for the task's terminal frame, then one response — the engine's answer (200), or the task's
 * error with its ErrorEnvelope status (429/503 with `Retry-After`). A task cancelled from
 * elsewhere (`POST /v2/tasks/{id}/cancel`) before its answer gets an empty answer, as a streamed
 * one gets its finish. A client that leaves before the answer calls `onClientGone` (cancel: the
 * dispatch is aborted, and with it the engine request).
 */
export function respondWithAnswer(o: AnswerResponseOptions): void {
  const { res, task } = o;
  const stream = task.stream;
  let done = false;

  const send = (status: number, text: string, extra: Record<string, string> = {}): void => {
    done = true;
    stream.unsubscribe(check);
    res.off('close', onClose);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(text)), ...extra, ...o.headers });
    res.end(text);
  };

  function check(): void {
    const terminal = stream.terminal;
    if (done || terminal === undefined) return;
    if (terminal.event === 'error') {
      const err: ErrorEvent = terminal.data;
      send(ERROR_STATUS[err.code], JSON.stringify(openAiErrorBody(err)), needsBackoffHeaders(err.code) ? { 'retry-after': '1', 'x-backoff-ms': '1000' } : {});
      return;
    }
    const answer = task.answer;
    if (answer !== undefined) {
      task.answer = undefined;
      send(200, answerText(answer.body, o.who));
      return;
    }
    if (terminal.event === 'end') send(200, JSON.stringify(new ResponseCollector(o.who).body(terminal.data, task.placement?.engine_version)));
  }

  const onClose = (): void => {
    if (done) return;
    done = true;
    stream.unsubscribe(check);
    o.onClientGone();
  };

  stream.subscribe(check);
  res.on('close', onClose);
  check();
}
