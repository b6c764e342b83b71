import type { SseFrame } from '@llama-orch/contracts';
import type { FrameEncoder } from '../streams/frame-encoder.js';
import { ChunkRenderer, errorChunk, type ResponseIdentity } from './chunks.js';
import { openAiErrorBody } from './openai-errors.js';

/**
 * The /v1 door's {@link FrameEncoder}: a task's frames as one streamed OpenAI response (chunks as
 * llama-server's own routes shape them, then `data: [DONE]`). `started` and `metrics` frames send
 * nothing; an error frame after the first chunk is one last `data: {"error"…}` event (an error
 * before it is the route's HTTP error: `TaskEventStream`'s `onRefused`).
 */
export class OpenAiChunkEncoder implements FrameEncoder {
  readonly verbose = false;
  readonly #renderer: ChunkRenderer;
  readonly #fingerprint: () => string | undefined;

  /** `fingerprint`: the engine build of the pool the task runs on (`system_fingerprint`), once placed. */
  constructor(who: ResponseIdentity, includeUsage: boolean, fingerprint: () => string | undefined) {
    this.#renderer = new ChunkRenderer(who, includeUsage);
    this.#fingerprint = fingerprint;
  }

  encode(_id: number, frame: SseFrame): string {
    const r = this.#renderer;
    switch (frame.event) {
      case 'token':
        return r.open(this.#fingerprint()) + r.token(frame.data);
      case 'end':
        return r.open(this.#fingerprint()) + r.end(frame.data);
      case 'error':
        return errorChunk(openAiErrorBody(frame.data));
      default:
        return '';
    }
  }
}
