import { formatSseFrame, type SseFrame } from '@llama-orch/contracts';

/**
 * How a door writes a task's frames: one record of the frame log in, that door's wire text out,
 * at the moment the door writes it. A door is one encoder (`/v2` SSE here, OpenAI chunks in
 * `openai/chunk-encoder.ts`); a new door (Anthropic messages, Responses) adds one, and every
 * stream writes through the same {@link TaskEventStream}.
 */
export interface FrameEncoder {
  /** Read the verbose variant of `metrics` frames. */
  readonly verbose: boolean;
  /** The text of frame `id` on this door's wire; '' for a frame the door does not send. */
  encode(id: number, frame: SseFrame): string;
}

/** `/v2` task events: every frame as `id: <seq>\nevent: <name>\ndata: <json>\n\n`. */
export const V2_SSE: FrameEncoder = Object.freeze({ verbose: false, encode: formatSseFrame });

/** `/v2` task events with `?verbose=true`: the same, with the verbose variant of `metrics` frames. */
export const V2_SSE_VERBOSE: FrameEncoder = Object.freeze({ verbose: true, encode: formatSseFrame });
