export { LlamaServerClient } from './llama-server-client.js';
export type { LlamaServerClientOptions, EngineHealth, EngineProps, EngineSlot, CompletionEvent } from './llama-server-client.js';
export { toCompletionBody, DEFAULT_TEMPERATURE } from './completion-body.js';
export type { CompletionBody, CompletionInput } from './completion-body.js';
export { parseSseData } from './sse-parser.js';
export {
  AdapterError,
  EngineUnreachableError,
  EngineLoadingError,
  EngineRejectedError,
  EngineProtocolError,
  WorkerResetError,
  CompletionAbortedError,
  ClientClosedError,
} from './errors.js';
export type { AdapterErrorCode } from './errors.js';
