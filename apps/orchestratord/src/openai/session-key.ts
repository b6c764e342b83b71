import { nameUuid } from '../sessions/session-ids.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The session of a /v1 request: the `X-Session-Id` header wins (a UUID is used as is, so it is the
 * same session `GET /v2/sessions/{id}` shows; any other text is hashed), else the body's `user`
 * (hashed: a user id is not a UUID, and the hash keeps it out of session ids). Undefined: a
 * one-turn session of its own. Admission puts the id in the namespace of the request's key
 * (sessions/session-ids.ts).
 */
export function sessionIdFor(
  header: string | string[] | undefined,
  user: string | null | undefined,
): string | undefined {
  const h = Array.isArray(header) ? header[0] : header;
  if (h !== undefined && h.trim() !== '') {
    const key = h.trim();
    return UUID.test(key) ? key.toLowerCase() : nameUuid(`session:${key}`);
  }
  if (user !== undefined && user !== null && user !== '') return nameUuid(`user:${user}`);
  return undefined;
}
