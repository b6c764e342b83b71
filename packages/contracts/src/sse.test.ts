import { describe, expect, it } from 'vitest';
import { SSE_EVENTS, SseFrameSchema, formatSseFrame, type SseFrame } from './index.js';

const frames: SseFrame[] = [
  { event: 'started', data: { queue_position: 3, predicted_start_ms: 120 } },
  { event: 'metrics', data: { queue_depth: 4, queue_position: 2, on_time_probability: 0.9, human: 'queued behind 2 tasks', phase: 'queued', prep: 0.5 } },
  { event: 'token', data: { t: 'héllo wörld 🌸\n"quoted"', i: 0 } },
  { event: 'end', data: { tokens_out: 16, decode_ms: 7.5, decode_time_ms: 7.5, pool_id: 'cpu0', node_id: 'n1', engine_version: 'b1-de3ff81', stop_type: 'limit' } },
  { event: 'end', data: { tokens_out: 3, decode_ms: 1, decode_time_ms: 1, canceled: true, stop_type: 'cancel' } },
  { event: 'error', data: { code: 'WORKER_RESET', message: 'engine stream ended without stop', retriable: true, engine: 'llamacpp' } },
];

/** Parses one wire frame back (the format a browser EventSource sees). */
function parseWire(text: string): { id: number; event: string; data: unknown } {
  expect(text.endsWith('\n\n')).toBe(true);
  const fields = Object.fromEntries(text.trimEnd().split('\n').map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 2)]));
  return { id: Number(fields.id), event: String(fields.event), data: JSON.parse(String(fields.data)) };
}

describe('SSE payloads', () => {
  it.each(frames.map((f, i) => [f.event, i, f] as const))('%s frame round-trips through the wire format (#%i)', (_name, i, frame) => {
    const wire = formatSseFrame(i + 1, frame);
    const back = parseWire(wire);
    expect(back.id).toBe(i + 1);
    expect(SseFrameSchema.parse({ event: back.event, data: back.data })).toEqual(frame);
  });

  it('every event name has a payload schema', () => {
    expect(Object.keys(SSE_EVENTS).sort()).toEqual(['end', 'error', 'metrics', 'started', 'token']);
  });

  it('rejects malformed payloads', () => {
    expect(SSE_EVENTS.token.safeParse({ t: 'x', i: -1 }).success).toBe(false);
    expect(SSE_EVENTS.token.safeParse({ t: 'x', i: 0, extra: 1 }).success).toBe(false);
    expect(SSE_EVENTS.metrics.safeParse({ queue_depth: 1, on_time_probability: 1.5 }).success).toBe(false);
    expect(SSE_EVENTS.end.safeParse({ tokens_out: 1, decode_ms: 1 }).success).toBe(false);
    expect(SSE_EVENTS.error.safeParse({ code: 'NOPE', message: 'x', retriable: false }).success).toBe(false);
  });
});
