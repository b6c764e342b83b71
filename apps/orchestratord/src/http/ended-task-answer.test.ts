import { formatSseFrame, type SseFrame } from '@llama-orch/contracts';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { StoredOutcome } from '../tasks/shared/end-writer.js';
import { answerEndedStream } from './ended-task-answer.js';

const end: SseFrame = { event: 'end', data: { tokens_out: 1, decode_ms: 1, decode_time_ms: 1 } };

// An ended task's events read through a replica that no longer holds it: rebuilt from the record.
describe('answerEndedStream', () => {
  const apps: ReturnType<typeof Fastify>[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });

  async function read(outcome: StoredOutcome, lastEventId?: number): Promise<string> {
    const app = Fastify();
    apps.push(app);
    app.get('/events', (req, reply) => void answerEndedStream(req, reply, outcome));
    const res = await app.inject({
      method: 'GET',
      url: '/events',
      headers: lastEventId === undefined ? {} : { 'last-event-id': String(lastEventId) },
    });
    expect(res.statusCode).toBe(200);
    return res.body;
  }

  it('replays the kept log after Last-Event-ID; a client whose ids ran ahead gets the terminal frame under the id after its own', async () => {
    const kept: StoredOutcome = { ...end, id: 3, first_token: 2, tokens: [{ t: 'a', i: 0 }] };
    expect(await read(kept, 1)).toBe(
      formatSseFrame(2, { event: 'token', data: { t: 'a', i: 0 } }) + formatSseFrame(3, end),
    );
    expect(await read(kept, 3)).toBe(formatSseFrame(3, end));
    expect(await read(kept, 7)).toBe(formatSseFrame(8, end));
  });

  it('a record that cannot give the frames before its end: the terminal frame alone, with its id, or the id after a client already past it', async () => {
    const lost: StoredOutcome = { ...end, id: 3, first_token: 2 }; // its token was not kept (past the size cap)
    expect(await read(lost)).toBe(formatSseFrame(3, end));
    expect(await read(lost, 1)).toBe(formatSseFrame(3, end));
    expect(await read(lost, 7)).toBe(formatSseFrame(8, end));
    expect(await read(end, 4)).toBe(formatSseFrame(5, end)); // a record without ids
  });
});
