import type { Principal } from './auth.js';

/**
 * Whether the caller may see and act on what the key named `owner` created: a task, its event
 * stream, its cancel, its session. With auth off (no principal) everything is open; an operator
 * key reaches everything; a client key only its own. A caller that may not gets the very 404 an
 * unknown id gets: a 403 would tell another tenant that the id exists.
 */
export function mayAccess(principal: Principal | undefined, owner: string | undefined): boolean {
  return principal === undefined || principal.role === 'operator' || principal.name === owner;
}
