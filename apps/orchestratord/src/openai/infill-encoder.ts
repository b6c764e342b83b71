import { ERROR_STATUS, type EndEvent, type SseFrame } from '@llama-orch/contracts';
import type { FrameEncoder } from '../streams/frame-encoder.js';
import { llamaCppErrorBody } from './engine-door-errors.js';

/**
 * A streamed `/infill` as llama-server streams it (its `/completion` stream: `data: <json>\n\n`
 * events, no `[DONE]`): one `{index, content, tokens, stop: false}` event per piece, then a last
 * `{index, content: "", tokens, stop: true, model, tokens_predicted, tokens_evaluated, stop_type,
 * tokens_cached}`. The engine's last event also carries its settings, prompt and timings, which
 * the node does not relay. An error after the first event is one last `data: {"error": …}` event
 * (before it, the route answers with the error's status).
 */
export class InfillEncoder implements FrameEncoder {
  readonly verbose = false;
  readonly #model: string;

  constructor(model: string) {
    this.#model = model;
  }

  encode(_id: number, frame: SseFrame): string {
    switch (frame.event) {
      case 'token':
        return `data: ${JSON.stringify({ index: 0, content: frame.data.t, tokens: [], stop: false })}\n\n`;
      case 'end':
        return `data: ${JSON.stringify(this.#last(frame.data))}\n\n`;
      case 'error':
        return `data: ${JSON.stringify(llamaCppErrorBody({ ...frame.data, status: ERROR_STATUS[frame.data.code] }))}\n\n`;
      default:
        return '';
    }
  }

  #last(end: EndEvent): Record<string, unknown> {
    const stopType =
      end.canceled === true ? 'none' : end.stop_type === 'limit' ? 'limit' : end.stop_type === 'word' ? 'word' : 'eos';
    return {
      index: 0,
      content: '',
      tokens: [],
      stop: true,
      model: this.#model,
      tokens_predicted: end.tokens_out,
      tokens_evaluated: end.prompt_tokens ?? 0,
      stop_type: stopType,
      tokens_cached: end.cached_tokens ?? 0,
      timings: { predicted_ms: end.decode_ms, predicted_n: end.tokens_out },
    };
  }
}
