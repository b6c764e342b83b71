import { PassThrough, Readable } from 'node:stream';
import type { DispatchEvent } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { readDispatchEvents, UpstreamStreamError } from './pool-client.js';

async function collect(chunks: (string | Buffer)[]): Promise<DispatchEvent[]> {
  const out: DispatchEvent[] = [];
  await readDispatchEvents(Readable.from(chunks, { objectMode: false }), (ev) => {
    out.push(ev);
    return true;
  });
  return out;
}

describe('readDispatchEvents', () => {
  it('parses lines split across chunks, a UTF-8 character split across chunks, and a last line without newline', async () => {
    const euro = Buffer.from('{"type":"token","t":"€","i":1}\n');
    const evs = await collect([
      '{"type":"token","t":"a",', '"i":0}\n\n', euro.subarray(0, 22), euro.subarray(22),
      '{"type":"end","tokens_out":2,"decode_ms":1,"stop_type":"limit","engine_version":"x","pool_id":"p","node_id":"n"}',
    ]);
    expect(evs.map((e) => (e.type === 'token' ? e.t : e.type))).toEqual(['a', '€', 'end']);
  });

  it('rejects a line that is not JSON or not a DispatchEvent, and destroys the body', async () => {
    const body = Readable.from(['{"type":"token","t":"a","i":0}\n', 'not json\n', '{"type":"token","t":"b","i":1}\n'], { objectMode: false });
    await expect(readDispatchEvents(body, () => true)).rejects.toBeInstanceOf(UpstreamStreamError);
    expect(body.destroyed).toBe(true);
    await expect(collect(['{"type":"token","t":5}\n'])).rejects.toThrow(/invalid dispatch event/);
  });

  it('stops when the callback says so, and reports a body that closes before its end', async () => {
    const body = new PassThrough();
    const seen: string[] = [];
    const done = readDispatchEvents(body, (ev) => {
      seen.push(ev.type);
      return false;
    });
    body.write('{"type":"token","t":"a","i":0}\n{"type":"token","t":"b","i":1}\n');
    await done;
    expect(seen).toEqual(['token']);
    expect(body.destroyed).toBe(true);
    const cut = new PassThrough();
    const broken = readDispatchEvents(cut, () => true);
    cut.write('{"type":"token","t":"a","i":0}\n');
    cut.destroy();
    await expect(broken).rejects.toThrow(/closed before its end/);
  });
});
