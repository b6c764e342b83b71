import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ProgressReporter } from './progress.js';
import type { ModelProgress } from './progress.js';
import { testLogger } from './test-helpers.js';

function fakeTty(isTTY: boolean): { stream: NodeJS.WriteStream; text: () => string } {
  const s = new PassThrough();
  let out = '';
  s.on('data', (d: Buffer) => {
    out += d.toString();
  });
  Object.assign(s, {
    isTTY,
    columns: 120,
    cursorTo: (_x: number, _y?: number, cb?: () => void) => {
      cb?.();
      return true;
    },
    clearLine: (_d: number, cb?: () => void) => {
      cb?.();
      return true;
    },
    moveCursor: () => true,
  });
  return { stream: s as unknown as NodeJS.WriteStream, text: () => out };
}

describe('progress', () => {
  it('draws a bar on a TTY and always delivers the final event', () => {
    const tty = fakeTty(true);
    const events: ModelProgress[] = [];
    const r = new ProgressReporter(
      { logger: testLogger(), tty: tty.stream, listeners: [(e) => events.push(e)] },
      'tiny',
    );
    r.update({ bytes_done: 0, bytes_total: 4 * 2 ** 20 });
    r.update({ bytes_done: 2 ** 20, bytes_total: 4 * 2 ** 20 });
    r.update({ bytes_done: 4 * 2 ** 20, bytes_total: 4 * 2 ** 20 });
    r.finish();
    expect(tty.text()).toContain('tiny [');
    expect(tty.text()).toContain('100% 4.0/4.0 MiB');
    expect(events[0]).toEqual({ bytes_done: 0, bytes_total: 4 * 2 ** 20 });
    expect(events.at(-1)).toEqual({ bytes_done: 4 * 2 ** 20, bytes_total: 4 * 2 ** 20 });
  });

  it('draws nothing when the stream is not a TTY', () => {
    const tty = fakeTty(false);
    const r = new ProgressReporter({ logger: testLogger(), tty: tty.stream, listeners: [] }, 'tiny');
    r.update({ bytes_done: 10 });
    r.finish();
    expect(tty.text()).toBe('');
  });
});
