import { hash } from 'node:crypto';

/**
 * A stable UUID for a name (UUID version 5 layout over SHA-1 with a fixed namespace prefix): the
 * same name always maps to the same session id. One-shot `hash` (no Hash object per call): it runs
 * on every admission with keys configured.
 */
export function nameUuid(name: string): string {
  const h = hash('sha1', `llama-orch/v1-session\0${name}`, 'buffer');
  h[6] = ((h[6] as number) & 0x0f) | 0x50;
  h[8] = ((h[8] as number) & 0x3f) | 0x80;
  const x = h.toString('hex', 0, 16);
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/**
 * The id a session is kept under: a client's session id in the namespace of the key that uses it.
 * Two keys that send the same `session_id`, `X-Session-Id` or `user` have two sessions (budget,
 * turns, prompt-cache affinity), and nobody can address another key's session by computing its id.
 * Without an owner (auth off) the client's id is used as it is. Still a UUID, so the task request
 * that carries it stays valid wherever it is parsed again (a takeover on another replica).
 */
export function ownedSessionId(owner: string | undefined, sessionId: string): string {
  return owner === undefined ? sessionId : nameUuid(`key:${owner}\0${sessionId}`);
}
