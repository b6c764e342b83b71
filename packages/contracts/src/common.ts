import { z } from 'zod';

/** Identifier of a pool: lowercase letters, digits, `-` and `_`; used in URLs and file names. */
export const PoolIdSchema = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'pool id: [a-z0-9][a-z0-9_-]{0,63}');
/** Identifier of a node; same alphabet as pool ids. */
export const NodeIdSchema = z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,127}$/, 'node id: [a-z0-9][a-z0-9_.-]{0,127}');
/** Absolute http(s) URL. */
export const HttpUrlSchema = z.url({ protocol: /^https?$/ });
/** Engines the product can drive. */
export const EngineKindSchema = z.enum(['llamacpp']);
export type EngineKind = z.infer<typeof EngineKindSchema>;
/** GPU policy of a pool: `required` fails fast without CUDA, `optional` uses it when present, `off` is CPU. */
export const GpuPolicySchema = z.enum(['required', 'optional', 'off']);
export type GpuPolicy = z.infer<typeof GpuPolicySchema>;
/** Hex SHA-256 digest (64 lowercase hex chars). */
export const Sha256Schema = z.string().regex(/^[0-9a-f]{64}$/, 'sha256: 64 lowercase hex characters');
/** ISO-8601 timestamp. */
export const TimestampSchema = z.iso.datetime({ offset: true });
