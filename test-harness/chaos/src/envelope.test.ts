import { describe, expect, it } from 'vitest';
import { envelopeProblems } from './envelope.js';

const json = { 'content-type': 'application/json; charset=utf-8', 'x-correlation-id': 'c' };

describe('envelopeProblems', () => {
  it('accepts a proper envelope and backoff headers on 503', () => {
    expect(envelopeProblems(400, json, '{"code":"INVALID_PARAMS","message":"x"}')).toEqual([]);
    expect(envelopeProblems(503, { ...json, 'retry-after': '1', 'x-backoff-ms': '500' }, '{"code":"POOL_UNREADY","message":"x","retriable":true}')).toEqual([]);
  });

  it('catches Fastify default bodies, wrong statuses, unknown codes, missing headers', () => {
    expect(envelopeProblems(400, { 'content-type': 'application/json' }, '{"error":"Bad Request","statusCode":400,"message":"x"}').join()).toMatch(
      /X-Correlation-Id.*unexpected envelope key 'error'/,
    );
    expect(envelopeProblems(500, json, '{"code":"INVALID_PARAMS","message":"x"}').join()).toMatch(/status 400 in the table/);
    expect(envelopeProblems(418, json, '{"code":"TEAPOT","message":"x"}').join()).toMatch(/unknown code/);
    expect(envelopeProblems(503, json, '{"code":"POOL_UNREADY","message":"x"}').join()).toMatch(/Retry-After.*X-Backoff-Ms/);
    expect(envelopeProblems(404, { ...json, 'content-type': 'text/html' }, '<html>').join()).toMatch(/not application\/json.*not JSON/);
  });
});
