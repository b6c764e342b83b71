import { PassThrough } from 'node:stream';
import type { DispatchEvent } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { readDispatchEvents } from './dispatch-events.js';

describe('readDispatchEvents', () => {
  it('parses plain and full token lines and the end, split anywhere', async () => {
    const body = new PassThrough();
    const seen: DispatchEvent[] = [];
    const done = readDispatchEvents(body, (ev) => (seen.push(ev), true));
    const text =
      '{"type":"token","t":"é","i":0}\n{"type":"token","t":"","i":1,"delta":{"tool_calls":[]}}\n' +
      '{"type":"end","tokens_out":2,"decode_ms":1,"stop_type":"eos","engine_version":"b1","pool_id":"p","node_id":"n"}\n';
    for (const b of Buffer.from(text)) body.write(Buffer.of(b));
    body.end();
    await done;
    expect(seen.map((e) => e.type)).toEqual(['token', 'token', 'end']);
    expect(seen[0]).toEqual({ type: 'token', t: 'é', i: 0 });
  });

  it('a token line with an unknown field is refused as before', async () => {
    const body = new PassThrough();
    const done = readDispatchEvents(body, () => true);
    body.end('{"type":"token","t":"a","i":0,"x":1}\n');
    await expect(done).rejects.toThrow(/invalid dispatch event/);
  });
});
