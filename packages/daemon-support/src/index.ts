export { logDestination } from './log-destination.js';
export type { LogDestination, LogDestinationOptions } from './log-destination.js';
export { closeAll, onceClose, CloseTimeoutError } from './close-all.js';
export type { CloseStep, CloseReport, CloseLog } from './close-all.js';
