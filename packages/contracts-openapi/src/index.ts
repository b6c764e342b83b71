export { renderOpenApi, renderServedDocuments, DOCUMENTS } from './openapi.js';
export { renderJsonSchemas } from './json-schemas.js';
export { DATA_PLANE, CONTROL_PLANE, NODES, OPENAI } from './routes.js';
export { POOL_MANAGER } from './pool-manager-routes.js';
export { ENGINE_DOORS } from './engine-door-routes.js';
export type { RouteSpec } from './routes.js';
