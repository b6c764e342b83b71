export { LlamaServerClient } from './llama-server-client.js';
export type { LlamaServerClientOptions, EngineHealth, EngineProps, EngineSlot } from './llama-server-client.js';
export { toCompletionBody, toChatBody, DEFAULT_TEMPERATURE } from './completion-body.js';
export type { CompletionBody, CompletionInput, ChatBody, ChatInput } from './completion-body.js';
export { completionEvents, chatEvents } from './stream-events.js';
export type { CompletionEvent, FinishReason } from './stream-events.js';
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
