import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { NdjsonEventWriter } from './ndjson-writer.js';

class FakeResponse extends EventEmitter {
  writes: string[] = [];
  ended: string | undefined;
  destroyed = false;
  writableEnded = false;
  full = false;
  write(text: string): boolean {
    this.writes.push(text);
    return !this.full;
  }
  end(text?: string): void {
    this.writableEnded = true;
    this.ended = text ?? '';
  }
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('NdjsonEventWriter (coalesced NDJSON writes)', () => {
  it('writes the events of one turn in one write, byte for byte JSON lines', async () => {
    const res = new FakeResponse();
    const w = new NdjsonEventWriter(res as unknown as ServerResponse);
    expect(w.event({ type: 'token', t: 'a"\n', i: 0 })).toBeUndefined();
    w.event({ type: 'token', t: 'é', i: 1 });
    expect(res.writes).toEqual([]);
    await tick();
    expect(res.writes).toEqual(['{"type":"token","t":"a\\"\\n","i":0}\n{"type":"token","t":"é","i":1}\n']);
    w.event({ type: 'token', t: 'b', i: 2 });
    await tick();
    expect(res.writes).toHaveLength(2);
  });

  it('end writes what is still queued with the end of the response', () => {
    const res = new FakeResponse();
    const w = new NdjsonEventWriter(res as unknown as ServerResponse);
    w.event({ type: 'error', code: 'INTERNAL', message: 'x', retriable: false });
    w.end();
    expect(res.ended).toBe('{"type":"error","code":"INTERNAL","message":"x","retriable":false}\n');
  });

  it('backed up: later events get a wait that settles on drain (or close), never rejects', async () => {
    const res = new FakeResponse();
    res.full = true;
    const w = new NdjsonEventWriter(res as unknown as ServerResponse);
    w.event({ type: 'token', t: 'a', i: 0 });
    await tick();
    const wait = w.event({ type: 'token', t: 'b', i: 1 });
    expect(wait).toBeInstanceOf(Promise);
    res.full = false;
    res.emit('drain');
    await wait;
    await tick();
    expect(w.event({ type: 'token', t: 'c', i: 2 })).toBeUndefined();
    res.full = true;
    await tick();
    w.event({ type: 'token', t: 'd', i: 3 });
    await tick();
    const again = w.event({ type: 'token', t: 'e', i: 4 });
    expect(again).toBeInstanceOf(Promise);
    res.emit('close');
    await again;
    expect(res.writes.join('')).toContain('"t":"d"');
  });
});

describe('NdjsonEventWriter.line (a re-attachable dispatch replays lines it holds)', () => {
  it('coalesces serialised lines with events in the same write, in order; backedUp says when a drain is awaited', async () => {
    const res = new FakeResponse();
    const w = new NdjsonEventWriter(res as unknown as ServerResponse);
    expect(w.line('{"type":"token","t":"a","i":0}\n')).toBeUndefined();
    w.event({ type: 'token', t: 'b', i: 1 });
    w.line('{"type":"token","t":"c","i":2}\n');
    await tick();
    expect(res.writes).toEqual([
      '{"type":"token","t":"a","i":0}\n{"type":"token","t":"b","i":1}\n{"type":"token","t":"c","i":2}\n',
    ]);
    expect(w.backedUp).toBe(false);
    res.full = true;
    w.line('{"type":"token","t":"d","i":3}\n');
    await tick();
    expect(w.backedUp).toBe(true);
    expect(w.line('{"type":"token","t":"e","i":4}\n')).toBeInstanceOf(Promise);
    res.emit('close');
    expect(w.backedUp).toBe(false);
  });
});
