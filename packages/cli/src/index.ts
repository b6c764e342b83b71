export { submit } from './commands/submit.js';
export type { SubmitOptions } from './commands/submit.js';
export { statusReport, nodesTable, metricTotal } from './commands/status.js';
export { up, humanLogLine } from './commands/up.js';
export type { UpOptions } from './commands/up.js';
export { streamTask } from './sse-client.js';
export { renderTable } from './table.js';
export { CliError } from './errors.js';
export type { Target } from './http.js';
