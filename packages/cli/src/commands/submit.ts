import { AdmissionResponseSchema, type ChatMessage, type Sampling, type TaskRequestInput } from '@llama-orch/contracts';
import { authHeaders, callJson, callNoContent, type Target } from '../http.js';
import { streamTask } from '../sse-client.js';
import { CliError, InterruptedError } from '../errors.js';

export interface SubmitOptions {
  /** The user message (chat), or the prompt with `raw`. */
  text: string;
  /** Plain completion of `text` instead of a chat turn. @default false */
  raw?: boolean;
  /** System message before the user message (chat only). */
  system?: string;
  model: string;
  maxTokens: number;
  seed: number | undefined;
  priority: 'interactive' | 'batch';
  /** Sampling controls sent as given; absent or empty = the engine's defaults. */
  sampling?: Sampling;
  /** Absent = orchestratord's configured default deadline. */
  deadlineMs?: number;
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
  signal?: AbortSignal;
}

/**
 * The `POST /v2/tasks` body: only what the user chose; ids, engine, ctx and the deadline are left
 * to orchestratord's documented defaults.
 */
export function taskBody(opts: SubmitOptions): TaskRequestInput {
  const body: TaskRequestInput = { model_ref: opts.model, priority: opts.priority, max_tokens: opts.maxTokens };
  if (opts.raw) {
    if (opts.system !== undefined) throw new CliError('a system message needs a chat task (not raw)');
    body.workload = 'completion';
    body.prompt = opts.text;
  } else {
    const messages: ChatMessage[] = [];
    if (opts.system !== undefined) messages.push({ role: 'system', content: opts.system });
    messages.push({ role: 'user', content: opts.text });
    body.workload = 'chat';
    body.messages = messages;
  }
  if (opts.seed !== undefined) body.seed = opts.seed;
  if (opts.sampling !== undefined && Object.keys(opts.sampling).length > 0) body.sampling = opts.sampling;
  if (opts.deadlineMs !== undefined) body.deadline_ms = opts.deadlineMs;
  return body;
}

/** How long a cancelled task's stream may take to deliver its `end {canceled}` frame, ms. */
const CANCEL_GRACE_MS = 3000;

/** `llorch submit --json`: the final result as one document. */
export interface SubmitResult {
  task_id: string;
  /** The whole answer (token texts joined). */
  text: string;
  tokens_out: number;
  prompt_tokens?: number;
  cached_tokens?: number;
  finish_reason?: string;
  /** The task ended cancelled (by Ctrl-C here, or by anyone else). */
  canceled: boolean;
  /** Ctrl-C arrived while the task ran: llorch cancelled it and exits 130. */
  interrupted: boolean;
  node_id?: string;
  pool_id?: string;
  engine_version?: string;
  decode_ms: number;
}

/**
 * Admits a task and follows its stream: token text to `out` as it arrives (unless `json`), the
 * admission and end summary to `err`. Aborting `signal` (Ctrl-C) cancels the task
 * (`POST /v2/tasks/{id}/cancel`) and waits up to 3 s for its `end {canceled}` frame; the result
 * then says `interrupted`. The admission itself is not aborted: without its task id there would
 * be nothing to cancel.
 */
export async function submit(target: Target, opts: SubmitOptions & { json?: boolean }): Promise<SubmitResult> {
  const admission = await callJson(target, 'POST', '/v2/tasks', AdmissionResponseSchema, taskBody(opts));
  const taskId = admission.task_id;
  const say = (line: string): void => {
    if (!opts.json) opts.err.write(line);
  };
  say(
    `task ${taskId} admitted (queue position ${admission.queue_position}, predicted start ${admission.predicted_start_ms} ms)\n`,
  );
  const streamAbort = new AbortController();
  let interrupted = false;
  let cancelled: Promise<unknown> = Promise.resolve();
  let grace: NodeJS.Timeout | undefined;
  const onInterrupt = (): void => {
    interrupted = true;
    say(`\ncanceling task ${taskId}\n`);
    cancelled = callNoContent(target, 'POST', `/v2/tasks/${encodeURIComponent(taskId)}/cancel`).then(
      () => undefined,
      (err: unknown) => err,
    );
    grace = setTimeout(() => streamAbort.abort(), CANCEL_GRACE_MS);
  };
  if (opts.signal?.aborted) onInterrupt();
  else opts.signal?.addEventListener('abort', onInterrupt, { once: true });
  let text = '';
  try {
    for await (const frame of streamTask(admission.streams.sse, {
      headers: authHeaders(target),
      signal: streamAbort.signal,
    })) {
      switch (frame.event) {
        case 'token':
          text += frame.data.t;
          if (!opts.json) opts.out.write(frame.data.t);
          break;
        case 'end': {
          const d = frame.data;
          if (!opts.json) opts.out.write('\n');
          const prompt =
            d.prompt_tokens === undefined ? '' : `, prompt ${d.prompt_tokens} tokens (${d.cached_tokens ?? 0} cached)`;
          const reason = d.finish_reason === undefined ? '' : `, finish ${d.finish_reason}`;
          say(
            `${d.canceled ? 'canceled' : 'done'}: ${d.tokens_out} tokens in ${d.decode_ms.toFixed(1)} ms${prompt}${reason}` +
              ` on ${d.node_id ?? '-'}/${d.pool_id ?? '-'} (${d.engine_version ?? 'unknown engine'})\n`,
          );
          return {
            task_id: taskId,
            text,
            tokens_out: d.tokens_out,
            canceled: d.canceled === true,
            interrupted,
            decode_ms: d.decode_ms,
            ...defined({
              prompt_tokens: d.prompt_tokens,
              cached_tokens: d.cached_tokens,
              finish_reason: d.finish_reason,
              node_id: d.node_id,
              pool_id: d.pool_id,
              engine_version: d.engine_version,
            }),
          };
        }
        case 'error':
          throw new CliError(`${frame.data.code}: ${frame.data.message}`);
        default:
          break;
      }
    }
  } catch (err) {
    if (!interrupted) throw err;
  } finally {
    opts.signal?.removeEventListener('abort', onInterrupt);
    clearTimeout(grace);
  }
  // Only an interrupted task gets here without a terminal frame (the stream throws otherwise).
  const failed = await cancelled;
  throw new InterruptedError(
    failed instanceof Error
      ? `interrupted; cancelling task ${taskId} failed: ${failed.message}`
      : `interrupted; task ${taskId} canceled`,
  );
}

function defined<T extends Record<string, unknown>>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
