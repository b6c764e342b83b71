import {
  EmbeddingsRequestSchema,
  InfillRequestSchema,
  RerankRequestSchema,
  TASK_LIMITS,
  type EngineCall,
  type EngineCallKind,
  type TaskRequestBody,
} from '@llama-orch/contracts';
import type { z } from 'zod';
import { InvalidParamsError } from '../errors.js';

/**
 * The engine-route doors' requests (`/v1/embeddings`, `/v1/rerank` and `/rerank`, `/infill`) as
 * the one internal task model: a task of the model with an engine call ({@link EngineCall}), which
 * pool-managerd sends to the engine's own route with the door's body as it came. Admission, lanes,
 * placement (only on pools with the capability), cancel and metrics are the chat door's.
 */

/** What an engine-route door needs to answer besides the task. */
export interface EngineCallRequest {
  readonly kind: EngineCallKind;
  /** The model name as the client sent it (the answer's `model`). */
  readonly model: string;
  /** Streamed (infill with `stream: true`): SSE as llama-server streams `/infill`. */
  readonly stream: boolean;
  readonly task: TaskRequestBody & { call: EngineCall };
}

function invalid(issue: z.core.$ZodIssue | undefined): InvalidParamsError {
  const param = issue === undefined || issue.path.length === 0 ? undefined : issue.path.map(String).join('.');
  const message = issue?.message ?? 'invalid request';
  return new InvalidParamsError(
    param === undefined ? `body: ${message}` : `${param}: ${message}`,
    param === undefined ? {} : { param },
  );
}

function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> & Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new InvalidParamsError('body: expected a JSON object');
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw invalid(parsed.error.issues[0]);
  return parsed.data as z.infer<S> & Record<string, unknown>;
}

/** The task of an engine call: the model, the lane (`priority: "batch"` as on the chat door), the session when given. */
function callTask(
  kind: EngineCallKind,
  model: string,
  body: Record<string, unknown>,
  maxTokens: number,
  sessionId: string | undefined,
): TaskRequestBody & { call: EngineCall } {
  const task: TaskRequestBody & { call: EngineCall } = {
    workload: 'completion',
    model_ref: model,
    engine: 'llamacpp',
    ctx: 0,
    priority: body.priority === 'batch' ? 'batch' : 'interactive',
    max_tokens: maxTokens,
    call: { kind, body },
  };
  if (sessionId !== undefined) task.session_id = sessionId;
  return task;
}

/**
 * `POST /v1/embeddings` (OpenAI's shape): text or token input, `encoding_format` float or base64.
 * `dimensions` is refused: llama-server returns the model's full width and cannot shorten it.
 */
export function embeddingsCall(raw: unknown): EngineCallRequest {
  const dims = (raw as { dimensions?: unknown } | null)?.dimensions;
  if (dims !== undefined && dims !== null) {
    throw new InvalidParamsError(`dimensions: not supported: the engine returns the model's full embedding width`, {
      param: 'dimensions',
    });
  }
  const body = parseBody(EmbeddingsRequestSchema, raw);
  // Nothing is generated: one token of budget keeps the task's predictions honest.
  return {
    kind: 'embeddings',
    model: body.model,
    stream: false,
    task: callTask('embeddings', body.model, body, 1, undefined),
  };
}

/** `POST /v1/rerank` and `/rerank` (llama-server's shape: `query`, `documents` or `texts`, `top_n`). */
export function rerankCall(raw: unknown): EngineCallRequest {
  const body = parseBody(RerankRequestSchema, raw);
  return { kind: 'rerank', model: body.model, stream: false, task: callTask('rerank', body.model, body, 1, undefined) };
}

/**
 * `POST /infill` (llama.cpp's shape), streamed or not. `model` may be left out as editor plugins
 * do, when `soleModel` names the one model that serves infill. Without `n_predict` the engine
 * would generate until the context is full: the door's default (the chat door's `max_tokens`
 * default) is written into the body instead.
 */
export function infillCall(
  raw: unknown,
  soleModel: () => string | undefined,
  sessionId: string | undefined,
): EngineCallRequest {
  const body = parseBody(InfillRequestSchema, raw);
  const model = body.model ?? soleModel();
  if (model === undefined)
    throw new InvalidParamsError('model: required: more than one model (or none) serves infill', { param: 'model' });
  if (body.n_predict === undefined) body.n_predict = TASK_LIMITS.defaultMaxTokens;
  const maxTokens = body.n_predict > 0 ? Math.min(body.n_predict, TASK_LIMITS.maxTokensMax) : TASK_LIMITS.maxTokensMax;
  return {
    kind: 'infill',
    model,
    stream: body.stream === true,
    task: callTask('infill', model, body, maxTokens, sessionId),
  };
}
