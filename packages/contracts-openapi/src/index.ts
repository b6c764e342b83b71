export { renderOpenApi, renderServedDocuments, DOCUMENTS } from './openapi.js';
export { renderJsonSchemas } from './json-schemas.js';
export { DATA_PLANE, CONTROL_PLANE, NODES, OPENAI, ENGINE_DOORS, POOL_MANAGER } from './routes.js';
export type { RouteSpec } from './routes.js';
