import type { ServerResponse } from 'node:http';
import type { ErrorEvent } from '@llama-orch/contracts';
import type { TaskStream } from '../streams/task-stream.js';
import { ResponseCollector, type ResponseIdentity } from './chunks.js';

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
  /** Sends the 200 answer body (JSON text); statuses are written in `http/`. */
  sendAnswer: (text: string) => void;
  /**
   * The door's answer text from the engine's OpenAI body (chat or completion; for a task cancelled
   * before its answer, the body collected from its frames). @default {@link answerText} (the /v1 door)
   */
  render?: (body: Record<string, unknown>) => string;
  /** Sends the task's failure (its ErrorEnvelope status, in OpenAI's shape). */
  sendRefusal: (err: ErrorEvent) => void;
  /** The task ended without an answer (cancelled from elsewhere). @default the body collected from its frames, rendered */
  onNoAnswer?: () => void;
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
 * for the task's terminal frame, then one response through `sendAnswer` (the engine's answer) or
 * `sendRefusal` (the task's error). A task cancelled from
 * elsewhere (`POST /v2/tasks/{id}/cancel`) before its answer gets an empty answer, as a streamed
 * one gets its finish. A client that leaves before the answer calls `onClientGone` (cancel: the
 * dispatch is aborted, and with it the engine request).
 */
export function respondWithAnswer(o: AnswerResponseOptions): void {
  const { res, task } = o;
  const stream = task.stream;
  let done = false;

  const finish = (): void => {
    done = true;
    stream.unsubscribe(check);
    res.off('close', onClose);
  };

  function check(): void {
    const terminal = stream.terminal;
    if (done || terminal === undefined) return;
    finish();
    if (terminal.event === 'error') return o.sendRefusal(terminal.data);
    const render = o.render ?? ((body: Record<string, unknown>): string => answerText(body, o.who));
    const answer = task.answer;
    if (answer !== undefined) {
      task.answer = undefined;
      return o.sendAnswer(render(answer.body));
    }
    if (o.onNoAnswer !== undefined) return o.onNoAnswer();
    if (terminal.event === 'end')
      o.sendAnswer(render(new ResponseCollector(o.who).body(terminal.data, task.placement?.engine_version)));
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
