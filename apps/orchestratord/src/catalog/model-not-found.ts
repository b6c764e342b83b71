import { ModelNotFoundError } from '../errors.js';

/**
 * The one refusal for a name that is neither a catalog entry or alias nor served by any pool: 404
 * MODEL_NOT_FOUND with `param: model` (`model_not_found` on /v1), never a retriable 503 — waiting
 * does not make an unknown model appear.
 */
export function modelNotFound(name: string): ModelNotFoundError {
  return new ModelNotFoundError(
    `model '${name}' not found: neither in the catalog nor served by any pool (GET /v2/catalog/models lists them)`,
    { param: 'model' },
  );
}
