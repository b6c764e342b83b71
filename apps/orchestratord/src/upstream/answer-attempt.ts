import type { Readable } from 'node:stream';
import {
  DispatchEventSchema,
  DispatchResultEventSchema,
  type DispatchEvent,
  type DispatchResultEvent,
} from '@llama-orch/contracts';
import { failurePolicy, type AttemptInput, type AttemptOutcome, type EndDispatchEvent } from './dispatch-attempt.js';
import { DispatchFailure, EngineError, UpstreamConnectError, UpstreamStreamError } from './upstream-errors.js';

/** Where a non-streamed attempt's answer goes (the task record). */
export interface AnswerSink {
  /** The node accepted the dispatch. */
  accepted(): void;
  /** The node's answer; false when the task takes it no more (it ended meanwhile). */
  answer(ev: DispatchResultEvent): boolean;
}

/** {@link AttemptInput} of a non-streamed dispatch: the body asks for `stream: false`, the answer goes to an {@link AnswerSink}. */
export type AnswerAttemptInput = Omit<AttemptInput, 'sink'> & { readonly sink: AnswerSink };

/** Largest answer line read from a node (an answer with logprobs of every token is some hundred KB). */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

const ABORTED: AttemptOutcome = { kind: 'aborted' };

/**
 * Runs one non-streamed dispatch of a task: the node answers with one NDJSON line, a `result`
 * event (the engine's answer) or an `error` event. The failure policy is the streamed attempt's
 * ({@link failurePolicy}) with nothing relayed, since nothing reaches the client before the answer:
 * a node or engine lost before it answered is re-placed per the policy, a refusal fails the task.
 */
export async function runAnswerAttempt(input: AnswerAttemptInput): Promise<AttemptOutcome> {
  const { sink, controller } = input;
  const outcome = (err: unknown): AttemptOutcome => {
    if (controller.aborted)
      return controller.reason instanceof DispatchFailure ? failurePolicy(controller.reason, 0, input) : ABORTED;
    return failurePolicy(err, 0, input);
  };
  let body: Readable;
  try {
    body = await input.client.dispatch(
      input.target,
      input.poolId,
      input.body,
      controller,
      input.correlationId,
      input.trace,
    );
  } catch (err) {
    return outcome(
      err instanceof DispatchFailure ? err : new UpstreamConnectError((err as Error).message, { cause: err }),
    );
  }
  sink.accepted();
  let ev: DispatchResultEvent | Extract<DispatchEvent, { type: 'error' }>;
  try {
    ev = parseAnswerLine(await readWhole(body));
  } catch (err) {
    return outcome(err);
  }
  if (controller.aborted) return outcome(undefined);
  if (ev.type === 'error') return outcome(new EngineError(ev.code, ev.message, ev.retriable));
  if (!sink.answer(ev)) return ABORTED;
  return { kind: 'end', event: endOf(ev) };
}

/** The `end` a result stands for: the figures the task's `end` frame, metrics and logs take. */
export function endOf(ev: DispatchResultEvent): EndDispatchEvent {
  const end: EndDispatchEvent = {
    type: 'end',
    tokens_out: ev.tokens_out,
    decode_ms: ev.decode_ms,
    stop_type: ev.stop_type,
    finish_reason: ev.finish_reason,
    prompt_tokens: ev.prompt_tokens,
    engine_version: ev.engine_version,
    pool_id: ev.pool_id,
    node_id: ev.node_id,
  };
  if (ev.cached_tokens !== undefined) end.cached_tokens = ev.cached_tokens;
  return end;
}

/**
 * The one line of a non-streamed dispatch as an event: a `result` (checked by
 * `DispatchResultEventSchema`, which looks at the engine body's members but not into them) or an
 * `error`. Anything else — no line, several lines, a token or end event, malformed JSON — is an
 * {@link UpstreamStreamError} (the node broke its contract, as a stream that ends without a
 * terminal event does).
 */
export function parseAnswerLine(text: string): DispatchResultEvent | Extract<DispatchEvent, { type: 'error' }> {
  const line = text.endsWith('\n') ? text.slice(0, -1) : text;
  if (line.trim() === '')
    throw new UpstreamStreamError('node ended a non-streamed dispatch without a result or error event');
  if (line.includes('\n')) throw new UpstreamStreamError('node sent more than one line for a non-streamed dispatch');
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch (err) {
    throw new UpstreamStreamError('node sent an answer line that is not JSON', { cause: err });
  }
  if ((json as { type?: unknown } | null)?.type === 'result') {
    const parsed = DispatchResultEventSchema.safeParse(json);
    if (!parsed.success)
      throw new UpstreamStreamError(
        `node sent an invalid result event: ${parsed.error.issues[0]?.message ?? 'invalid'}`,
      );
    return parsed.data;
  }
  const parsed = DispatchEventSchema.safeParse(json);
  if (!parsed.success || parsed.data.type !== 'error')
    throw new UpstreamStreamError(
      'node answered a non-streamed dispatch with something other than a result or error event',
    );
  return parsed.data;
}

/** The whole body as text; rejects with {@link UpstreamStreamError} when it breaks, closes early or grows past the cap. */
function readWhole(body: Readable): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (err?: UpstreamStreamError): void => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onError);
      body.off('close', onClose);
      if (err === undefined) resolve(Buffer.concat(chunks, size).toString('utf8'));
      else reject(err);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > MAX_ANSWER_BYTES) {
        settle(new UpstreamStreamError(`node's answer exceeds ${MAX_ANSWER_BYTES} bytes`));
        body.on('error', () => undefined);
        body.destroy();
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => settle();
    const onError = (err: Error): void => settle(new UpstreamStreamError('answer from node broke', { cause: err }));
    const onClose = (): void => settle(new UpstreamStreamError('answer from node closed before its end'));
    body.on('data', onData);
    body.on('end', onEnd);
    body.on('error', onError);
    body.on('close', onClose);
  });
}
