import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import {
  BACKOFF_FLOOR_MS,
  backoffHeaders,
  backoffMs,
  describeValidation,
  requestError,
  sendErrorEnvelope,
} from './error-envelope.js';

describe('backoff of a 429/503', () => {
  it("keeps the server's estimate in ms, floored at 1 ms; Retry-After is whole seconds, at least 1", () => {
    expect(BACKOFF_FLOOR_MS).toBe(1);
    expect(backoffMs(undefined)).toBe(1000);
    expect(backoffMs(350)).toBe(350);
    expect(backoffMs(0)).toBe(1);
    expect(backoffMs(1500.4)).toBe(1500);
    expect(backoffHeaders(350)).toEqual({ 'retry-after': '1', 'x-backoff-ms': '350' });
    expect(backoffHeaders(1001)).toEqual({ 'retry-after': '2', 'x-backoff-ms': '1001' });
  });

  it('sendErrorEnvelope: status, correlation id, backoff only on 429/503, another body shape on request', async () => {
    const app = Fastify({ genReqId: () => 'corr-1' });
    app.get('/busy', (_req, reply) =>
      sendErrorEnvelope(reply, 429, { code: 'ADMISSION_REJECT', message: 'full', retry_after_ms: 250 }),
    );
    app.get('/bad', (_req, reply) => sendErrorEnvelope(reply, 400, { code: 'INVALID_PARAMS', message: 'x: bad' }));
    app.get('/v1', (_req, reply) =>
      sendErrorEnvelope(reply, 503, { code: 'POOL_UNAVAILABLE', message: 'none' }, (e) => ({
        error: { message: e.message, retry_ms: e.retry_after_ms },
      })),
    );
    const busy = await app.inject('/busy');
    expect([
      busy.statusCode,
      busy.headers['retry-after'],
      busy.headers['x-backoff-ms'],
      busy.headers['x-correlation-id'],
    ]).toEqual([429, '1', '250', 'corr-1']);
    expect(busy.json()).toEqual({ code: 'ADMISSION_REJECT', message: 'full', retry_after_ms: 250, retriable: true });
    const bad = await app.inject('/bad');
    expect([bad.statusCode, bad.headers['retry-after'], bad.headers['x-backoff-ms']]).toEqual([
      400,
      undefined,
      undefined,
    ]);
    expect(bad.headers['content-type']).toBe('application/json; charset=utf-8');
    const v1 = await app.inject('/v1');
    expect([v1.statusCode, v1.headers['x-backoff-ms']]).toEqual([503, '1000']);
    expect(v1.json()).toEqual({ error: { message: 'none', retry_ms: 1000 } });
    await app.close();
  });
});

describe('request errors', () => {
  it('names each invalid field and every unknown one', () => {
    expect(
      describeValidation('body', [
        { instancePath: '/task_id', message: 'Invalid UUID' },
        { instancePath: '', keyword: 'unrecognized_keys', params: { keys: ['extra', 'more'] } },
        { instancePath: '', message: 'Required' },
      ]),
    ).toBe("task_id: Invalid UUID; unknown fields 'extra', 'more'; body: Required");
  });

  it('maps what Fastify raises about a request to envelope codes, nothing else', () => {
    expect(
      requestError({ validation: [{ instancePath: '/a', message: 'no' }], validationContext: 'querystring' }),
    ).toEqual({ code: 'INVALID_PARAMS', message: 'a: no' });
    expect(requestError({ code: 'FST_ERR_CTP_BODY_TOO_LARGE', statusCode: 413, message: 'big' })).toEqual({
      code: 'PAYLOAD_TOO_LARGE',
      message: 'big',
    });
    expect(requestError({ statusCode: 404, message: 'gone' })).toEqual({ code: 'NOT_FOUND', message: 'gone' });
    expect(requestError({ statusCode: 415, message: 'type' })).toEqual({
      code: 'INVALID_PARAMS',
      message: 'body: type',
    });
    expect(requestError(new Error('boom'))).toBeUndefined();
    expect(requestError({ statusCode: 500 })).toBeUndefined();
  });
});
