import type { SseFrame } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { OpenAiChunkEncoder } from './chunk-encoder.js';
import { ChunkRenderer, errorChunk, type ResponseIdentity } from './chunks.js';
import { openAiErrorBody } from './openai-errors.js';

const who: ResponseIdentity = { kind: 'chat', id: 'chatcmpl-1', created: 1_700_000_000, model: 'synthetic' };
const end: SseFrame = { event: 'end', data: { tokens_out: 2, decode_ms: 1, decode_time_ms: 1, stop_type: 'eos' } };

describe('OpenAiChunkEncoder', () => {
  it("a task's frames as the ChunkRenderer renders them: nothing for started/metrics, the role chunk with the first piece, finish + usage + [DONE] at the end", () => {
    let fingerprint: string | undefined;
    const enc = new OpenAiChunkEncoder(who, true, () => fingerprint);
    const r = new ChunkRenderer(who, true);
    expect(enc.encode(0, { event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } })).toBe('');
    expect(enc.encode(1, { event: 'metrics', data: { queue_depth: 0, on_time_probability: 1 } })).toBe('');
    fingerprint = 'b1-x';
    expect(enc.encode(2, { event: 'token', data: { t: 'Hi', i: 0 } })).toBe(
      r.open('b1-x') + r.token({ t: 'Hi', i: 0 }),
    );
    expect(enc.encode(3, { event: 'token', data: { t: '!', i: 1 } })).toBe(r.token({ t: '!', i: 1 }));
    expect(enc.encode(4, end)).toBe(r.end(end.data as never));
    expect(enc.encode(4, end).endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('an error frame is one last OpenAI error event', () => {
    const enc = new OpenAiChunkEncoder(who, false, () => undefined);
    const err = { code: 'WORKER_RESET', message: 'engine gone', retriable: true } as const;
    expect(enc.encode(3, { event: 'error', data: err })).toBe(errorChunk(openAiErrorBody(err)));
  });
});
