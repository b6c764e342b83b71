import { AdmissionResponseSchema, type ChatMessage, type Sampling, type TaskRequestInput } from '@llama-orch/contracts';
import { authHeaders, callJson, type Target } from '../http.js';
import { streamTask } from '../sse-client.js';
import { CliError } from '../errors.js';

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

/** Admits a task and prints its text as it streams; returns the end frame's token count. */
export async function submit(target: Target, opts: SubmitOptions): Promise<number> {
  const admission = await callJson(target, 'POST', '/v2/tasks', AdmissionResponseSchema, taskBody(opts));
  opts.err.write(`task ${admission.task_id} admitted (queue position ${admission.queue_position}, predicted start ${admission.predicted_start_ms} ms)\n`);
  for await (const frame of streamTask(admission.streams.sse, { headers: authHeaders(target), signal: opts.signal })) {
    switch (frame.event) {
      case 'token':
        opts.out.write(frame.data.t);
        break;
      case 'end': {
        const d = frame.data;
        opts.out.write('\n');
        const prompt = d.prompt_tokens === undefined ? '' : `, prompt ${d.prompt_tokens} tokens (${d.cached_tokens ?? 0} cached)`;
        const reason = d.finish_reason === undefined ? '' : `, finish ${d.finish_reason}`;
        opts.err.write(
          `${d.canceled ? 'canceled' : 'done'}: ${d.tokens_out} tokens in ${d.decode_ms.toFixed(1)} ms${prompt}${reason}` +
            ` on ${d.node_id ?? '-'}/${d.pool_id ?? '-'} (${d.engine_version ?? 'unknown engine'})\n`,
        );
        return d.tokens_out;
      }
      case 'error':
        throw new CliError(`${frame.data.code}: ${frame.data.message}`);
      default:
        break;
    }
  }
  throw new CliError('stream ended without a terminal event');
}
