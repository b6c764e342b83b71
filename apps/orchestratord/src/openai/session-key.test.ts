import { describe, expect, it } from 'vitest';
import { nameUuid } from '../sessions/session-ids.js';
import { sessionIdFor } from './session-key.js';

describe('the session of a /v1 request', () => {
  it('X-Session-Id wins: a UUID as is (lower-cased), other text hashed to a stable UUID', () => {
    expect(sessionIdFor('6F1C1A5E-8D4B-4C2E-9A61-0B7C2D3E4F50', 'alice')).toBe('6f1c1a5e-8d4b-4c2e-9a61-0b7c2d3e4f50');
    expect(sessionIdFor('chat-42', 'alice')).toBe(nameUuid('session:chat-42'));
    expect(sessionIdFor(['chat-42', 'other'], undefined)).toBe(nameUuid('session:chat-42'));
  });

  it("else the body's user, hashed (the same user is the same session; a header text and a user of the same text are not)", () => {
    expect(sessionIdFor(undefined, 'alice')).toBe(sessionIdFor('', 'alice'));
    expect(sessionIdFor(undefined, 'alice')).not.toBe(sessionIdFor(undefined, 'bob'));
    expect(sessionIdFor(undefined, 'alice')).not.toBe(sessionIdFor('alice', undefined));
    expect(sessionIdFor(undefined, null)).toBeUndefined();
    expect(sessionIdFor(undefined, '')).toBeUndefined();
  });

  it('hashes are RFC 4122 version-5 shaped UUIDs', () => {
    for (const name of ['a', 'user:alice', 'x'.repeat(1000)])
      expect(nameUuid(name)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
