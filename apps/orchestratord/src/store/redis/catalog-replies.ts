import { ModelAliasSchema, ModelPolicySchema, Sha256Schema } from '@llama-orch/contracts';
import { z } from 'zod';
import type { CatalogModelEntry, CatalogRegistration } from '../catalog-store.js';
import { int, list, records, text } from './script-replies.js';

/*
 * A catalog entry as the catalog scripts keep it (lua/catalog-put.lua): the hash `catalog:m:<id>`,
 * whose `spec` is the registration as JSON (written here, read back here, parsed with zod: Redis is
 * another process), and the load state as plain fields.
 */

const SpecSchema = z.strictObject({
  ref: z.string().min(1),
  sha256: Sha256Schema.optional(),
  aliases: z.array(ModelAliasSchema),
  policy: ModelPolicySchema,
});

const EntryHashSchema = z.object({
  spec: z.string(),
  registered_at: z.coerce.number(),
  last_error: z.string().optional(),
  failed_at: z.coerce.number().optional(),
  load_owner: z.string().optional(),
  load_until: z.coerce.number().optional(),
});

/** The `spec` field the put script stores: the registration, nothing else. */
export function specJson(r: CatalogRegistration): string {
  return JSON.stringify({
    ref: r.ref,
    ...(r.sha256 !== undefined ? { sha256: r.sha256 } : {}),
    aliases: r.aliases,
    policy: r.policy,
  });
}

/** An entry's hash as a script answers it (a flat field/value list), read at server time `now`. */
export function catalogEntry(id: string, flat: unknown, now: number): CatalogModelEntry {
  const fields: Record<string, string> = {};
  for (const [field, value] of records(flat, 2)) fields[text(field)] = text(value);
  const h = EntryHashSchema.parse(fields);
  const spec = SpecSchema.parse(JSON.parse(h.spec));
  const live = h.load_owner !== undefined && h.load_until !== undefined && h.load_until > now;
  return {
    id,
    ref: spec.ref,
    ...(spec.sha256 !== undefined ? { sha256: spec.sha256 } : {}),
    aliases: spec.aliases,
    policy: spec.policy,
    registeredAt: h.registered_at,
    ...(h.last_error !== undefined ? { lastError: h.last_error } : {}),
    ...(h.failed_at !== undefined ? { failedAt: h.failed_at } : {}),
    ...(live ? { load: { owner: h.load_owner as string, until: h.load_until as number } } : {}),
  };
}

/** The reply of catalog-read and catalog-delete: {now, {id, hash}, …}. */
export function catalogEntries(r: unknown): CatalogModelEntry[] {
  const [now, ...rows] = list(r);
  const at = int(now);
  return rows.map((row) => {
    const [id, flat] = list(row);
    return catalogEntry(text(id), flat, at);
  });
}
