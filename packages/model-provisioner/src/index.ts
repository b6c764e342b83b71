export { ModelProvisioner } from './model-provisioner.js';
export type { ModelProvisionerOptions, EnsureOptions, ModelProvisionerState } from './model-provisioner.js';
export { parseModelRef, sourceOf, isSafeModelId, MODEL_REF_GRAMMAR, MODEL_ID_PATTERN } from './model-ref.js';
export type { ModelRef, ParseModelRefOptions } from './model-ref.js';
export { parseSyntheticParams, canonicalSyntheticRef, SYNTHETIC_LLAMA_DEFAULTS } from './synthetic-params.js';
export type { SyntheticLlamaParams } from './synthetic-params.js';
export {
  writeSyntheticModel,
  SYNTHETIC_VOCAB_FILE,
  SYNTHETIC_CHAT_TEMPLATE,
  SYNTHETIC_TOOL_USE_TEMPLATE,
  SYNTHETIC_GENERATOR_VERSION,
} from './synthetic-model.js';
export type { SyntheticModelResult } from './synthetic-model.js';
export { readGgufInfo, readGgufHeader, ggufInfoFromHeader } from './gguf-reader.js';
export type { GgufHeader, GgufKv, GgufTensorInfo, GgufValue } from './gguf-reader.js';
export { Catalog, ProvenanceRecordSchema } from './catalog.js';
export type { CatalogOptions, ProvenanceAction, ProvenanceRecord } from './catalog.js';
export type { ModelProgress } from './progress.js';
export type { RetryPolicy } from './download.js';
export { ModelStore } from './store.js';
export { ModelProvisionError } from './errors.js';
export type { ModelProvisionErrorCode } from './errors.js';
