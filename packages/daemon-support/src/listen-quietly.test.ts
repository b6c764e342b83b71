import Fastify from 'fastify';
import { pino, type Logger } from 'pino';
import { Writable } from 'node:stream';
import { describe, expect, it, onTestFinished } from 'vitest';
import { listenQuietly } from './listen-quietly.js';

function capture(level: string): { lines: Array<{ level: number; msg: string }>; logger: Logger } {
  const lines: Array<{ level: number; msg: string }> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
      cb();
    },
  });
  return { lines, logger: pino({ level }, sink) };
}

describe('listenQuietly', () => {
  it("Fastify's own listening line is not logged at info; the instance logs at info again after", async () => {
    const { lines, logger } = capture('info');
    const app = Fastify({ loggerInstance: logger });
    onTestFinished(() => app.close());
    const url = await listenQuietly(app, { host: '127.0.0.1', port: 0 });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    app.log.info('after');
    expect(lines.map((l) => l.msg)).toEqual(['after']);
  });

  it('it goes to debug', async () => {
    const { lines, logger } = capture('debug');
    const app = Fastify({ loggerInstance: logger });
    onTestFinished(() => app.close());
    await listenQuietly(app, { host: '127.0.0.1', port: 0 });
    expect(lines.filter((l) => l.msg.startsWith('Server listening at'))).toMatchObject([{ level: 20 }]);
  });

  it('a failed listen restores the logger too', async () => {
    const { lines, logger } = capture('info');
    const app = Fastify({ loggerInstance: logger });
    onTestFinished(() => app.close());
    await expect(listenQuietly(app, { host: '256.0.0.1', port: 0 })).rejects.toThrow();
    app.log.info('after');
    expect(lines.map((l) => l.msg)).toContain('after');
  });
});
