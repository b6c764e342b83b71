import { z } from 'zod';
import { Sha256Schema, TimestampSchema } from './common.js';
import { ModelAliasSchema, ModelPolicySchema } from './catalog.js';

/** What the GGUF header says about a model. */
export const GgufInfoSchema = z
  .strictObject({
    /** `general.architecture` (e.g. `llama`). */
    architecture: z.string(),
    /** `<arch>.context_length`: training context, tokens. */
    context_length: z.int().nonnegative(),
    /** Parameter count summed over tensor shapes, when the tensor table was read. */
    n_params: z.int().nonnegative().optional(),
    /** `general.file_type` (0 = all F32, 1 = mostly F16, …). */
    file_type: z.int().nonnegative(),
    /** Number of tensors in the file. */
    tensor_count: z.int().nonnegative(),
  })
  .meta({ id: 'GgufInfo' });
export type GgufInfo = z.infer<typeof GgufInfoSchema>;

/** Result of model-provisioner `ensure(ref)`. */
export const ResolvedModelSchema = z
  .strictObject({
    /** Catalog id (stable, derived from the ref). */
    id: z.string(),
    /** The ref as given. */
    ref: z.string(),
    /** Absolute path of the GGUF file. */
    local_path: z.string(),
    /** File size, bytes. */
    size_bytes: z.int().nonnegative(),
    /** SHA-256 of the file. */
    sha256: Sha256Schema,
    /** Header facts. */
    gguf: GgufInfoSchema,
    /** Where it came from: `hf`, `https`, `file`, `synthetic`. */
    source: z.enum(['hf', 'https', 'file', 'synthetic']),
  })
  .meta({ id: 'ResolvedModel' });
export type ResolvedModel = z.infer<typeof ResolvedModelSchema>;

/** Lifecycle of a catalog entry: `Retired` models are kept but not placed. */
export const ModelLifecycleSchema = z.enum(['Active', 'Retired']);
export type ModelLifecycle = z.infer<typeof ModelLifecycleSchema>;

/** One model in a node's cache. */
export const CatalogEntrySchema = z
  .strictObject({
    /** Catalog id. */
    id: z.string(),
    /** Ref the model was resolved from. */
    ref: z.string(),
    /** Absolute path of the file. */
    local_path: z.string(),
    /** SHA-256 of the file. */
    sha256: Sha256Schema,
    /** File size, bytes. */
    size_bytes: z.int().nonnegative(),
    /** Lifecycle state. */
    lifecycle: ModelLifecycleSchema,
    /** Last time a pool used the model (LRU eviction order). */
    last_used: TimestampSchema,
    /** Source kind and details (url, generator parameters). */
    provenance: z.strictObject({ source: z.string(), detail: z.string().optional() }),
  })
  .meta({ id: 'CatalogEntry' });
export type CatalogEntry = z.infer<typeof CatalogEntrySchema>;

/**
 * Body of `POST /v2/catalog/models`: a model the fleet serves on demand, with its policy (spec 67).
 * The first request for its ref or an alias loads it where it fits.
 */
export const CatalogRegisterRequestSchema = z
  .strictObject({
    /** Model ref (resolved by the nodes). */
    ref: z.string().min(1).max(512),
    /** Expected SHA-256, verified before use. */
    sha256: Sha256Schema.optional(),
    /** Other names clients may use for it. @default [] */
    aliases: z.array(ModelAliasSchema).max(16).default([]),
    ...ModelPolicySchema.shape,
  })
  .meta({ id: 'CatalogRegisterRequest' });
export type CatalogRegisterRequestInput = z.input<typeof CatalogRegisterRequestSchema>;
export type CatalogRegisterRequest = z.infer<typeof CatalogRegisterRequestSchema>;
