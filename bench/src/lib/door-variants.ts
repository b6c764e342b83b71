import { request, type Dispatcher } from 'undici';
import { UnexpectedResponseError } from '../errors.js';
import { addedOver, type RelayVariant } from './relay-variants.js';
import type { Figure } from './result.js';
import { timeGeneration, type FrameReading, type TimedGeneration } from './streams.js';
import type { SseFrame } from './sse.js';

/**
 * The other doors' streams (issue 27): Anthropic's `POST /v1/messages` and OpenAI's
 * `POST /v1/responses`, each sent to the engine's own route or to orchestratord's door, timed like
 * the chat variants: token times are the arrival of text deltas, the generation ends at the
 * stream's last event.
 */
export type DoorKind = 'messages' | 'responses';

/** The door's request for one generation of `content` (one user message, temperature 0). */
export function doorBody(kind: DoorKind, content: string, maxTokens: number): Record<string, unknown> {
  return kind === 'messages'
    ? { messages: [{ role: 'user', content }], max_tokens: maxTokens, temperature: 0, stream: true }
    : { input: [{ role: 'user', content }], max_output_tokens: maxTokens, temperature: 0, stream: true };
}

function readMessages(f: SseFrame): FrameReading | undefined {
  if (f.event === 'message_stop') return { end: true };
  if (f.event !== 'content_block_delta') return undefined;
  const delta = (JSON.parse(f.data) as { delta?: { type?: string; text?: string } }).delta;
  return delta?.type === 'text_delta' && typeof delta.text === 'string' && delta.text !== ''
    ? { token: delta.text }
    : undefined;
}

function readResponses(f: SseFrame): FrameReading | undefined {
  if (f.event === 'response.completed' || f.event === 'response.incomplete') return { end: true };
  if (f.event !== 'response.output_text.delta') return undefined;
  const delta = (JSON.parse(f.data) as { delta?: string }).delta;
  return typeof delta === 'string' && delta !== '' ? { token: delta } : undefined;
}

/** One streamed request to `<baseUrl>/v1/messages` or `/v1/responses` (with `token`: orchestratord's door). */
export async function doorGeneration(
  kind: DoorKind,
  baseUrl: string,
  body: Record<string, unknown>,
  dispatcher: Dispatcher,
  opts: { token?: string; reset?: boolean } = {},
): Promise<TimedGeneration> {
  const path = kind === 'messages' ? '/v1/messages' : '/v1/responses';
  const sentAt = performance.now();
  const res = await request(`${baseUrl}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      ...(opts.token !== undefined ? { authorization: `Bearer ${opts.token}` } : {}),
    },
    body: JSON.stringify(body),
    dispatcher,
    reset: opts.reset ?? false,
  });
  if (res.statusCode !== 200)
    throw new UnexpectedResponseError(
      `POST ${baseUrl}${path} answered ${res.statusCode}: ${(await res.body.text()).slice(0, 500)}`,
    );
  return timeGeneration(res.body, sentAt, kind === 'messages' ? readMessages : readResponses, `${kind} stream`);
}

/**
 * The streamed rows of one door (`msg`, `resp`): its stream through the daemons against the engine's
 * own route for the same API, as the `/v1` chat rows are against the engine's chat route.
 */
export function doorStreamRows(key: 'msg' | 'resp', relay: RelayVariant, direct: RelayVariant): Record<string, Figure> {
  const noun = key === 'msg' ? '/v1/messages (Anthropic)' : '/v1/responses';
  const a = addedOver(relay, direct);
  return {
    [`${key}_ttft_added_p50`]: {
      label: `${noun} stream through the daemons: added TTFT p50 (over the engine's own route)`,
      value: a.ttftP50,
      unit: 'ms',
    },
    [`${key}_ttft_added_p99`]: { label: `${noun} through the daemons: added TTFT p99`, value: a.ttftP99, unit: 'ms' },
    [`${key}_itl_added_p99`]: {
      label: `${noun} through the daemons: added inter-token p99`,
      value: a.itlP99,
      unit: 'ms',
    },
    [`${key}_tps_vs_direct`]: {
      label: `${noun} through the daemons: tokens/s ÷ the engine's own route (median)`,
      value: a.tpsRatio,
      unit: '×',
    },
    [`${key}_cpu_us_per_token`]: {
      label: `${noun} through the daemons: CPU per token, both daemons`,
      value: relay.cpuUsPerToken().total as number,
      unit: 'µs',
    },
  };
}
