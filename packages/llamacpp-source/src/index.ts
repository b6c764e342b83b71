export { locateBundle } from './bundle.js';
export type { LlamaCppBundle } from './bundle.js';
export { ensureSourceTree } from './source-tree.js';
export type { SourceSpec, SourceTree, EnsureSourceOptions } from './source-tree.js';
export { SourceError } from './errors.js';
export type { SourceErrorCode } from './errors.js';
export { loadPatchSet, preparePatchedTree, defaultPatchesDir, NO_PATCHES } from './patches.js';
export type { PatchSet, SourcePatch } from './patches.js';
