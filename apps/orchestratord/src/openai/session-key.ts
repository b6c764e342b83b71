import { createHash } from 'node:crypto';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A stable UUID for a name (UUID version 5 layout over SHA-1 with a fixed namespace prefix): the
 * same conversation key always maps to the same session, so its turns share budget, turn count and
 * prompt-cache affinity.
 */
export function nameUuid(name: string): string {
  const h = createHash('sha1').update('llama-orch/v1-session\0').update(name).digest();
  h[6] = ((h[6] as number) & 0x0f) | 0x50;
  h[8] = ((h[8] as number) & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/**
 * The session of a /v1 request: the `X-Session-Id` header wins (a UUID is used as is, so it is the
 * same session `GET /v2/sessions/{id}` shows; any other text is hashed), else the body's `user`
 * (hashed: a user id is not a UUID, and the hash keeps it out of session ids). Undefined: a
 * one-turn session of its own.
 */
export function sessionIdFor(header: string | string[] | undefined, user: string | null | undefined): string | undefined {
  const h = Array.isArray(header) ? header[0] : header;
  if (h !== undefined && h.trim() !== '') {
    const key = h.trim();
    return UUID.test(key) ? key.toLowerCase() : nameUuid(`session:${key}`);
  }
  if (user !== undefined && user !== null && user !== '') return nameUuid(`user:${user}`);
  return undefined;
}
