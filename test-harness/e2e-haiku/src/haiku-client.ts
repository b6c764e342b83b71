import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { minuteWord } from './minute-words.js';
import { recordStream, type RecordedFrame } from './sse-recorder.js';

export interface HaikuRun {
  correlationId: string;
  request: Record<string, unknown>;
  admissionStatus: number;
  admission: Record<string, unknown>;
  minute: string;
  frames: RecordedFrame[];
  closedWithoutTerminal: boolean;
  text: string;
  startedAt: number;
  finishedAt: number;
}

export interface HaikuOptions {
  orchUrl: string;
  token: string;
  model: string;
  seed: number;
  maxTokens: number;
  pinPoolId?: string;
  /** Called for each frame; may trigger a cancel. */
  onFrame?: (f: RecordedFrame, run: { taskId: string }) => void;
  /** `strict` = greedy sampling (the default here); `best_effort` = seeded sampling at the engine's temperature. */
  determinism?: 'strict' | 'best_effort';
  /** The minute word is derived at stream start; tests may fix the clock. */
  now?: () => Date;
  /** Chat variant: the haiku request as a user message (`workload: chat`), rendered with the model's template. */
  chat?: boolean;
  /** `sampling.temperature`, when the run sets one. */
  temperature?: number;
}

/** The request of the suite; the minute word ties a haiku to the moment it was asked for. */
export function haikuRequest(minute: string): string {
  return `Write a haiku about GPUs computing at night. Use the word "${minute}" exactly once.`;
}

/** The completion prompt: the request plus a cue for a base model. */
export function haikuPrompt(minute: string): string {
  return `${haikuRequest(minute)}\n\nHaiku:\n`;
}

/**
 * Body of the direct engine request equivalent to a task (see .specs/40-llamacpp-adapter.md):
 * greedy (`strict`) sends temperature 0, seeded sampling the adapter's default 0.8.
 */
export function directBody(
  prompt: string,
  maxTokens: number,
  seed: number,
  determinism: 'strict' | 'best_effort' = 'strict',
): Record<string, unknown> {
  return {
    prompt,
    n_predict: maxTokens,
    stream: true,
    cache_prompt: false,
    seed,
    temperature: determinism === 'strict' ? 0 : 0.8,
  };
}

/** One client run: ids, prompt, POST /v2/tasks → 202 → SSE, every frame recorded with its time. */
export async function runHaiku(opts: HaikuOptions): Promise<HaikuRun> {
  const correlationId = randomUUID();
  const taskId = randomUUID();
  const startedAt = Date.now();
  const minute = minuteWord((opts.now?.() ?? new Date()).getMinutes());
  const body: Record<string, unknown> = {
    task_id: taskId,
    session_id: randomUUID(),
    model_ref: opts.model,
    engine: 'llamacpp',
    ctx: 0,
    priority: 'interactive',
    seed: opts.seed,
    determinism: opts.determinism ?? 'strict',
    ...(opts.chat
      ? { workload: 'chat', messages: [{ role: 'user', content: haikuRequest(minute) }] }
      : { workload: 'completion', prompt: haikuPrompt(minute) }),
    ...(opts.temperature === undefined ? {} : { sampling: { temperature: opts.temperature } }),
    max_tokens: opts.maxTokens,
    deadline_ms: 120_000,
    ...(opts.pinPoolId ? { placement: { mode: 'pin', pin_pool_id: opts.pinPoolId } } : {}),
  };
  const headers = { authorization: `Bearer ${opts.token}`, 'x-correlation-id': correlationId };
  const res = await request(new URL('/v2/tasks', opts.orchUrl), {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const admission = (await res.body.json()) as Record<string, unknown>;
  if (res.statusCode !== 202) {
    return {
      correlationId,
      request: body,
      admissionStatus: res.statusCode,
      admission,
      minute,
      frames: [],
      closedWithoutTerminal: false,
      text: '',
      startedAt,
      finishedAt: Date.now(),
    };
  }
  const sse = (admission.streams as { sse: string }).sse;
  const { frames, closedWithoutTerminal } = await recordStream(sse, headers, {
    onFrame: (f) => opts.onFrame?.(f, { taskId }),
  });
  const text = frames
    .filter((f) => f.event === 'token')
    .map((f) => String(f.data.t))
    .join('');
  return {
    correlationId,
    request: body,
    admissionStatus: res.statusCode,
    admission,
    minute,
    frames,
    closedWithoutTerminal,
    text,
    startedAt,
    finishedAt: Date.now(),
  };
}
