import { describe, expect, it } from 'vitest';
import {
  anthropicErrorProblems,
  envelopeProblems,
  isAnthropicDoorPath,
  isOpenAiDoorPath,
  openAiErrorProblems,
} from './envelope.js';

const json = { 'content-type': 'application/json; charset=utf-8', 'x-correlation-id': 'c' };

describe('envelopeProblems', () => {
  it('accepts a proper envelope and backoff headers on 503', () => {
    expect(envelopeProblems(400, json, '{"code":"INVALID_PARAMS","message":"x"}')).toEqual([]);
    expect(
      envelopeProblems(
        503,
        { ...json, 'retry-after': '1', 'x-backoff-ms': '500' },
        '{"code":"POOL_UNREADY","message":"x","retriable":true}',
      ),
    ).toEqual([]);
  });

  it('catches Fastify default bodies, wrong statuses, unknown codes, missing headers', () => {
    expect(
      envelopeProblems(
        400,
        { 'content-type': 'application/json' },
        '{"error":"Bad Request","statusCode":400,"message":"x"}',
      ).join(),
    ).toMatch(/X-Correlation-Id.*unexpected envelope key 'error'/);
    expect(envelopeProblems(500, json, '{"code":"INVALID_PARAMS","message":"x"}').join()).toMatch(
      /status 400 in the table/,
    );
    expect(envelopeProblems(418, json, '{"code":"TEAPOT","message":"x"}').join()).toMatch(/unknown code/);
    expect(envelopeProblems(503, json, '{"code":"POOL_UNREADY","message":"x"}').join()).toMatch(
      /Retry-After.*X-Backoff-Ms/,
    );
    expect(envelopeProblems(404, { ...json, 'content-type': 'text/html' }, '<html>').join()).toMatch(
      /not application\/json.*not JSON/,
    );
  });

  it("/v1 door errors: OpenAI's shape with the status's type, and the same headers", () => {
    expect(isOpenAiDoorPath('/v1')).toBe(true);
    expect(isOpenAiDoorPath('/v1/chat/completions')).toBe(true);
    expect(isOpenAiDoorPath('/v10')).toBe(false);
    expect(isOpenAiDoorPath('/v2/tasks')).toBe(false);
    expect(
      openAiErrorProblems(
        401,
        json,
        '{"error":{"message":"missing bearer token","type":"authentication_error","param":null,"code":"UNAUTHORIZED"}}',
      ),
    ).toEqual([]);
    expect(
      openAiErrorProblems(
        400,
        json,
        '{"error":{"message":"x","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}',
      ),
    ).toEqual([]);
    expect(openAiErrorProblems(404, json, '{"code":"NOT_FOUND","message":"x"}').join()).toMatch(
      /unexpected key 'code'.*no 'error' object/,
    );
    expect(
      openAiErrorProblems(
        401,
        json,
        '{"error":{"message":"x","type":"invalid_request_error","param":null,"code":"UNAUTHORIZED"}}',
      ).join(),
    ).toMatch(/error.type/);
    expect(
      openAiErrorProblems(
        429,
        json,
        '{"error":{"message":"x","type":"rate_limit_error","param":null,"code":"ADMISSION_REJECT"}}',
      ).join(),
    ).toMatch(/Retry-After.*X-Backoff-Ms/);
  });

  it("Messages door errors: Anthropic's shape with the status's type", () => {
    expect(isAnthropicDoorPath('/v1/messages/count_tokens')).toBe(true);
    expect(isAnthropicDoorPath('/v1/messagesx')).toBe(false);
    expect(
      anthropicErrorProblems(
        401,
        json,
        '{"type":"error","error":{"type":"authentication_error","message":"missing key"}}',
      ),
    ).toEqual([]);
    expect(
      anthropicErrorProblems(
        400,
        json,
        '{"error":{"message":"x","type":"invalid_request_error","param":null,"code":"invalid_value"}}',
      ).join(),
    ).toMatch(/type undefined is not 'error'/);
    expect(
      anthropicErrorProblems(503, json, '{"type":"error","error":{"type":"api_error","message":"x"}}').join(),
    ).toMatch(/error.type.*Retry-After/);
  });
});
