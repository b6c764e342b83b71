import { z } from 'zod';
import { ErrorCodeSchema } from './errors.js';

/** Where a task is: in the admission queue, on a node, or done (its record stays for the retention). */
export const TaskStateSchema = z.enum(['queued', 'running', 'ended']).meta({ id: 'TaskState' });
export type TaskState = z.infer<typeof TaskStateSchema>;

/** How an ended task ended. */
export const TaskOutcomeSchema = z
  .strictObject({
    /** `completed`: the engine ended it (`stop_type` says why); `canceled`: a client or a disconnect; `error`: the `error` frame. */
    result: z.enum(['completed', 'canceled', 'error']),
    /** The engine's stop reason (`eos`, `max_tokens`, `stop_string`, `cancel`, …) when it ended the task. */
    stop_type: z.string().optional(),
    /** The OpenAI-style finish reason, when the engine gave one. */
    finish_reason: z.string().optional(),
    /** The error frame's code and message, for `error`. */
    error: z.strictObject({ code: ErrorCodeSchema, message: z.string() }).optional(),
  })
  .meta({ id: 'TaskOutcome' });
export type TaskOutcome = z.infer<typeof TaskOutcomeSchema>;

/**
 * `GET /v2/tasks/{id}`: a task's record, from admission until `ORCHD_TASK_RETENTION_MS` after its
 * end. Times are milliseconds since the epoch; durations are measured from admission.
 */
export const TaskInfoSchema = z
  .strictObject({
    task_id: z.string(),
    state: TaskStateSchema,
    /** The model as the client named it (an alias stays the alias). */
    model: z.string(),
    /** The model reference the name resolved to. */
    model_ref: z.string(),
    priority: z.enum(['interactive', 'batch']),
    workload: z.enum(['completion', 'chat']),
    /** The API it came through: `v2`; `v1` (chat and text completions), `responses`, `anthropic`, `embeddings`, `rerank`, `infill`. */
    door: z.string(),
    /** The admitting request's correlation id (on every log line of the task). */
    correlation_id: z.string(),
    admitted_at: z.int().nonnegative(),
    /** While queued: tasks ahead of it in dispatch order (0-based), as last computed. */
    queue_position: z.int().nonnegative().optional(),
    /** While queued: the predicted wait until its first token at admission, ms. */
    predicted_start_ms: z.int().nonnegative().optional(),
    /** Where it runs, or last ran. */
    pool_id: z.string().optional(),
    node_id: z.string().optional(),
    /** Dispatches so far (a re-placement after a node failed before the first token counts again). */
    attempts: z.int().nonnegative(),
    /** Once ended. */
    outcome: TaskOutcomeSchema.optional(),
    usage: z.strictObject({
      /** Prompt tokens, when the engine reported them (at the end). */
      tokens_in: z.int().nonnegative().optional(),
      /** Tokens generated so far (the engine's count once ended). */
      tokens_out: z.int().nonnegative(),
      /** Prompt tokens served from the engine's prompt cache, when reported. */
      cached_tokens: z.int().nonnegative().optional(),
    }),
    timings: z.strictObject({
      /** Admission → its (last) dispatch, ms; absent while queued. */
      queued_ms: z.number().nonnegative().optional(),
      /** Admission → first token, ms. */
      first_token_ms: z.number().nonnegative().optional(),
      /** Admission → end, ms. */
      total_ms: z.number().nonnegative().optional(),
      dispatched_at: z.int().nonnegative().optional(),
      first_token_at: z.int().nonnegative().optional(),
      ended_at: z.int().nonnegative().optional(),
    }),
  })
  .meta({ id: 'TaskInfo' });
export type TaskInfo = z.infer<typeof TaskInfoSchema>;

/** `GET /v2/tasks`: newest admitted first; `next_cursor` fetches the next page. */
export const TaskListSchema = z
  .strictObject({
    tasks: z.array(TaskInfoSchema),
    /** Pass as `cursor` for the next (older) page; absent on the last page. */
    next_cursor: z.string().optional(),
  })
  .meta({ id: 'TaskList' });
export type TaskList = z.infer<typeof TaskListSchema>;

/** The query of `GET /v2/tasks`. */
export const TaskListQuerySchema = z
  .strictObject({
    state: TaskStateSchema.optional(),
    model: z.string().min(1).max(512).optional(),
    priority: z.enum(['interactive', 'batch']).optional(),
    /** Only tasks admitted at or after this time: ms since the epoch, or an ISO-8601 timestamp. */
    since: z
      .union([z.coerce.number().int().nonnegative(), z.iso.datetime({ offset: true })])
      .transform((v) => (typeof v === 'number' ? v : Date.parse(v)))
      .optional(),
    /** Page size. @default 50 */
    limit: z.coerce.number().int().min(1).max(500).default(50),
    /** `next_cursor` of the previous page. */
    cursor: z.string().max(200).optional(),
  })
  .meta({ id: 'TaskListQuery' });
export type TaskListQuery = z.infer<typeof TaskListQuerySchema>;
