import { z } from 'zod';

/**
 * One client API key of orchestratord's keys file (`ORCHD_KEYS_FILE`). The key itself is never in
 * the file: either its SHA-256 (`key_sha256`, hex) or the name of an environment variable holding
 * it (`key_env`), exactly one of them.
 */
export const ClientKeyEntrySchema = z
  .strictObject({
    /** Who the key belongs to: the `key` label of the per-key metrics and the rate-limit bucket; logged, unlike the key. */
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'name: 1–64 of [A-Za-z0-9._-], starting with a letter or digit'),
    /** SHA-256 of the key, 64 hex digits (`printf %s "$KEY" | sha256sum`). */
    key_sha256: z.string().regex(/^[0-9a-fA-F]{64}$/, 'key_sha256: 64 hex digits').optional(),
    /** Environment variable holding the key (at least 16 characters). */
    key_env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'key_env: an environment variable name').optional(),
    /**
     * `client` (tasks, /v1, sessions, reads of the cluster) or `operator` (also drain, reload,
     * catalog changes, the node list). @default client
     */
    role: z.enum(['client', 'operator']).default('client'),
    /** Requests per minute for this key (429 with Retry-After past it); absent = unlimited. */
    rate_limit: z.int().min(1).max(1_000_000).optional(),
    /** Highest lane this key's tasks may use: `batch` = never `interactive`. @default interactive */
    max_priority: z.enum(['interactive', 'batch']).default('interactive'),
  })
  .refine((e) => (e.key_sha256 === undefined) !== (e.key_env === undefined), { message: 'exactly one of key_sha256 and key_env' })
  .meta({ id: 'ClientKeyEntry' });
export type ClientKeyEntry = z.infer<typeof ClientKeyEntrySchema>;

/** orchestratord's keys file (YAML): `keys: [ClientKeyEntry…]`, names unique. */
export const KeysFileSchema = z
  .strictObject({
    keys: z.array(ClientKeyEntrySchema).min(1).max(10_000),
  })
  .superRefine((f, ctx) => {
    const seen = new Set<string>();
    f.keys.forEach((k, i) => {
      if (seen.has(k.name)) ctx.addIssue({ code: 'custom', message: `duplicate key name '${k.name}'`, path: ['keys', i, 'name'] });
      seen.add(k.name);
    });
  })
  .meta({ id: 'KeysFile', description: 'orchestratord client keys (ORCHD_KEYS_FILE).' });
export type KeysFile = z.infer<typeof KeysFileSchema>;
