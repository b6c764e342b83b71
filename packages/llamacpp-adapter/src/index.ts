export { LlamaServerClient, ANSWER_KEEP_ALIVE } from './llama-server-client.js';
export type {
  LlamaServerClientOptions,
  EngineHealth,
  EngineProps,
  EngineSlot,
  RequestHeaders,
} from './llama-server-client.js';
export { toCompletionBody, toChatBody, DEFAULT_TEMPERATURE } from './completion-body.js';
export type { CompletionBody, CompletionInput, ChatBody, ChatInput } from './completion-body.js';
export { answerFigures, answerRequestOf, readAnswer } from './answer.js';
export { callFigures, callRequestOf, readCallAnswer } from './engine-call.js';
export type { AnswerFigures, AnswerInput, EngineAnswer } from './answer.js';
export type { CompletionEvent, FinishReason, TokenRecord } from './stream-events.js';
export { parseSseData } from './testing/sse-parser.js';
export { pullEvents, completeEvents, chatEvents } from './testing/pull-events.js';
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
