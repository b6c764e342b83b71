import { randomUUID } from 'node:crypto';
import { AdmissionResponseSchema, type TaskRequestInput } from '@llama-orch/contracts';
import { authHeaders, callJson, type Target } from '../http.js';
import { streamTask } from '../sse-client.js';
import { CliError } from '../errors.js';

export interface SubmitOptions {
  prompt: string;
  model: string;
  maxTokens: number;
  seed: number | undefined;
  priority: 'interactive' | 'batch';
  deadlineMs: number;
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
  signal?: AbortSignal;
}

/** Admits a task and prints its text as it streams; returns the end frame's token count. */
export async function submit(target: Target, opts: SubmitOptions): Promise<number> {
  const task: TaskRequestInput = {
    task_id: randomUUID(),
    session_id: randomUUID(),
    workload: 'completion',
    model_ref: opts.model,
    engine: 'llamacpp',
    ctx: 0,
    priority: opts.priority,
    prompt: opts.prompt,
    max_tokens: opts.maxTokens,
    deadline_ms: opts.deadlineMs,
    ...(opts.seed === undefined ? {} : { seed: opts.seed }),
  };
  const admission = await callJson(target, 'POST', '/v2/tasks', AdmissionResponseSchema, task);
  opts.err.write(`task ${admission.task_id} admitted (queue position ${admission.queue_position}, predicted start ${admission.predicted_start_ms} ms)\n`);
  for await (const frame of streamTask(admission.streams.sse, { headers: authHeaders(target), signal: opts.signal })) {
    switch (frame.event) {
      case 'token':
        opts.out.write(frame.data.t);
        break;
      case 'end':
        opts.out.write('\n');
        opts.err.write(
          `${frame.data.canceled ? 'canceled' : 'done'}: ${frame.data.tokens_out} tokens in ${frame.data.decode_ms.toFixed(1)} ms` +
            ` on ${frame.data.node_id ?? '-'}/${frame.data.pool_id ?? '-'} (${frame.data.engine_version ?? 'unknown engine'})\n`,
        );
        return frame.data.tokens_out;
      case 'error':
        throw new CliError(`${frame.data.code}: ${frame.data.message}`);
      default:
        break;
    }
  }
  throw new CliError('stream ended without a terminal event');
}
