import type { TokenEvent } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { ChunkRenderer, type ResponseIdentity } from './chunks.js';

const chat: ResponseIdentity = { kind: 'chat', id: 'chatcmpl-1', created: 1_700_000_000, model: 'synthetic' };
const completion: ResponseIdentity = { kind: 'completion', id: 'cmpl-1', created: 1_700_000_000, model: 'm "quoted"' };

/** The chunk as OpenAI's object in its documented key order, serialised the plain way. */
function expected(who: ResponseIdentity, fingerprint: string | undefined, choice: Record<string, unknown>): string {
  const obj: Record<string, unknown> = {
    id: who.id,
    object: who.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion',
    created: who.created,
    model: who.model,
  };
  if (fingerprint !== undefined) obj.system_fingerprint = fingerprint;
  obj.choices = [choice];
  return `data: ${JSON.stringify(obj)}\n\n`;
}

const PIECES = [
  'Hello',
  ' world',
  '"quoted"',
  'line\nbreak',
  'tab\tand \\ backslash',
  'é ü 漢字 🦙',
  '\u2028',
  '</script>',
];

describe('ChunkRenderer plain pieces (cached head)', () => {
  for (const fingerprint of ['b1234-abc', undefined]) {
    it(`chat chunks are byte-identical to the general form (fingerprint ${String(fingerprint)})`, () => {
      const r = new ChunkRenderer(chat, false);
      r.open(fingerprint);
      for (const t of PIECES) {
        const tok: TokenEvent = { t, i: 0 };
        expect(r.token(tok)).toBe(
          expected(chat, fingerprint, { index: 0, delta: { content: t }, finish_reason: null }),
        );
      }
    });

    it(`completion chunks are byte-identical to the general form (fingerprint ${String(fingerprint)})`, () => {
      const r = new ChunkRenderer(completion, false);
      r.open(fingerprint);
      for (const t of PIECES) {
        expect(r.token({ t, i: 1 })).toBe(
          expected(completion, fingerprint, { index: 0, text: t, logprobs: null, finish_reason: null }),
        );
      }
    });
  }

  it('a piece rendered before open() does not pin the head without the fingerprint', () => {
    const r = new ChunkRenderer(chat, false);
    expect(r.token({ t: 'a', i: 0 })).toBe(
      expected(chat, undefined, { index: 0, delta: { content: 'a' }, finish_reason: null }),
    );
    r.open('fp');
    expect(r.token({ t: 'b', i: 1 })).toBe(
      expected(chat, 'fp', { index: 0, delta: { content: 'b' }, finish_reason: null }),
    );
  });

  it('pieces with delta fields or logprobs still take the general form', () => {
    const r = new ChunkRenderer(chat, false);
    r.open('fp');
    const delta = { tool_calls: [{ index: 0, function: { arguments: '{' } }] };
    expect(r.token({ t: 'x', i: 0, delta })).toBe(
      expected(chat, 'fp', { index: 0, delta: { content: 'x', ...delta }, finish_reason: null }),
    );
    expect(r.token({ t: '', i: 1 })).toBe('');
    const lp = [{ token: 'y', logprob: -0.5 }];
    expect(r.token({ t: 'y', i: 2, logprobs: lp })).toBe(
      expected(chat, 'fp', { index: 0, delta: { content: 'y' }, finish_reason: null, logprobs: { content: lp } }),
    );
  });
});
