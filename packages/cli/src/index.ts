export { submit, taskBody } from './commands/submit.js';
export { parseCommandLine, loadJsonSchemaFormat, USAGE, COMMAND_USAGE } from './args.js';
export type { CommandLine, SubmitArgs } from './args.js';
export type { SubmitOptions, SubmitResult } from './commands/submit.js';
export {
  statusReport,
  statusDocument,
  renderStatus,
  nodesTable,
  listNodes,
  renderNodes,
  metricTotal,
  queueDepth,
} from './commands/status.js';
export type { StatusDocument } from './commands/status.js';
export { cancelTask, drainPool, reloadPool } from './commands/pool-ops.js';
export { listModels, renderModels, loadModel, unloadModel } from './commands/models.js';
export { listTasks, getTask, renderTasks, renderTask, formatMs, outcomeText } from './commands/tasks.js';
export type { TaskFilters } from './commands/tasks.js';
export { up, humanLogLine, listeningUrl, dashboardUrl } from './commands/up.js';
export type { UpOptions } from './commands/up.js';
export { detectPdeathsigPrefix } from './pdeathsig.js';
export { paintFor, PLAIN } from './color.js';
export type { Paint } from './color.js';
export { cliVersion } from './version.js';
export { streamTask } from './sse-client.js';
export { renderTable } from './table.js';
export { CliError, UsageError, InterruptedError } from './errors.js';
export type { Target } from './http.js';
