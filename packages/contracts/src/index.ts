export {
  ErrorCodeSchema, ERROR_STATUS, RETRIABLE_BY_DEFAULT, ErrorEnvelopeSchema, needsBackoffHeaders,
} from './errors.js';
export type { ErrorCode, ErrorEnvelope } from './errors.js';
export {
  PoolIdSchema, NodeIdSchema, HttpUrlSchema, EngineKindSchema, GpuPolicySchema, Sha256Schema, TimestampSchema,
} from './common.js';
export type { EngineKind, GpuPolicy } from './common.js';
export {
  TASK_LIMITS, PlacementOverridesSchema, TaskRequestSchema, resolveTaskRequest, PreparationStepSchema, AdmissionResponseSchema, SessionInfoSchema,
} from './task.js';
export type {
  PlacementOverrides, TaskRequest, TaskRequestBody, TaskRequestInput, PreparationStep, AdmissionResponse, SessionInfo,
} from './task.js';
export { TaskStateSchema, TaskOutcomeSchema, TaskInfoSchema, TaskListSchema, TaskListQuerySchema } from './task-info.js';
export type { TaskState, TaskOutcome, TaskInfo, TaskList, TaskListQuery } from './task-info.js';
export {
  StartedEventSchema, TokenEventSchema, MetricsEventSchema, EndEventSchema, ErrorEventSchema, SSE_EVENTS, SseFrameSchema, formatSseFrame,
} from './sse.js';
export type {
  StartedEvent, TokenEvent, MetricsEvent, EndEvent, ErrorEvent, SseEventName, SseFrame,
} from './sse.js';
export { EngineSourceSchema, BuildProvenanceSchema, PreparedEngineSchema } from './engine.js';
export type { EngineSource, BuildProvenance, PreparedEngine } from './engine.js';
export {
  GgufInfoSchema, ResolvedModelSchema, ModelLifecycleSchema, CatalogEntrySchema, CatalogRegisterRequestSchema,
} from './model.js';
export type {
  GgufInfo,
  ResolvedModel,
  ModelLifecycle,
  CatalogEntry,
  CatalogRegisterRequest,
  CatalogRegisterRequestInput,
} from './model.js';
export { HandoffFileSchema } from './handoff.js';
export type { HandoffFile } from './handoff.js';
export {
  PoolStateSchema, ProvisioningProgressSchema, BreakerStateSchema, PoolFactsSchema, PoolStatusSchema, ManagerHealthSchema, DrainRequestSchema,
  ReloadRequestSchema, PoolOperationResponseSchema, DispatchRequestSchema, DispatchEventSchema, DispatchResultEventSchema, PoolStatusListSchema,
  DispatchPathSchema, DispatchReattachQuerySchema,
} from './pool.js';
export type {
  PoolState, ProvisioningProgress, PoolStatus, DrainRequest, ReloadRequest, DispatchRequest, DispatchRequestInput, DispatchEvent, DispatchResultEvent,
} from './pool.js';
export {
  GpuInfoSchema, NodeCapabilitiesSchema, PoolSnapshotSchema, NodeRegisterRequestSchema, NodeAckSchema, HeartbeatRequestSchema,
  NodeStateSchema, NodeInfoSchema, NodeListSchema,
} from './nodes.js';
export type { PoolSnapshot, NodeRegisterRequest, NodeAck, HeartbeatRequest, NodeState, NodeInfo } from './nodes.js';
export {
  CapabilitiesSchema, ClusterPoolSchema, ClusterPoolListSchema, PoolHealthSchema, AvailabilitySchema, ClusterModelSchema, ClusterModelListSchema,
} from './control.js';
export type { Capabilities, ClusterPool, PoolHealth, ClusterModel } from './control.js';
export {
  OrchestratorConfigSchema, ORCHESTRATOR_ENV, RedisUrlSchema, PoolConfigSchema, PoolManagerConfigSchema, SupervisionConfigSchema, OnDemandConfigSchema,
} from './config.js';
export type {
  OrchestratorConfig, PoolConfig, PoolConfigInput, PoolManagerConfig, PoolManagerConfigInput, SupervisionConfig, OnDemandConfig,
} from './config.js';
export { formatIssues } from './format-issues.js';
export { CORRELATION_ID_HEADER, isCorrelationId } from './correlation.js';
export {
  StopSchema, ResponseFormatSchema, SamplingSchema, SAMPLING_FIELDS, ChatMessageSchema, ChatMessagesSchema, NamedToolChoiceSchema, toolName,
} from './sampling.js';
export type { ResponseFormat, Sampling, ChatMessage, NamedToolChoice } from './sampling.js';
export {
  ChatCompletionRequestSchema, CompletionRequestSchema, UsageSchema, ChatCompletionSchema, ChatCompletionChunkSchema, CompletionSchema,
  OpenAiModelSchema, OpenAiModelListSchema, OpenAiErrorSchema,
} from './openai.js';
export type { ChatCompletionRequest, CompletionRequest, Usage, OpenAiModel, OpenAiError } from './openai.js';
export { ClientKeyEntrySchema, KeysFileSchema } from './keys.js';
export type { ClientKeyEntry, KeysFile } from './keys.js';
export { LivenessSchema, ReadinessSchema, ProbePoolSchema, ManagerReadinessSchema } from './probes.js';
export type { Liveness, Readiness, ManagerReadiness } from './probes.js';
export {
  DashboardOutcomeSchema, DashboardTaskSchema, ThroughputPointSchema, DashboardQueueSchema, DashboardReplicaSchema, DashboardSnapshotSchema,
} from './dashboard.js';
export type { DashboardOutcome, DashboardTask, ThroughputPoint, DashboardQueue, DashboardReplica, DashboardSnapshot } from './dashboard.js';
export {
  AnthropicMessagesRequestSchema, AnthropicCountTokensRequestSchema, AnthropicMessageParamSchema, AnthropicToolSchema, AnthropicToolChoiceSchema,
  AnthropicTextBlockSchema, AnthropicUsageSchema, AnthropicMessageSchema, AnthropicCountTokensSchema, AnthropicErrorSchema,
} from './anthropic.js';
export type { AnthropicMessagesRequest, AnthropicCountTokensRequest, AnthropicMessageParam, AnthropicMessage, AnthropicError } from './anthropic.js';
export {
  ResponsesRequestSchema, ResponseInputItemSchema, ResponseFunctionToolSchema, ResponseObjectSchema, ResponseRetrieveQuerySchema,
  ResponseInputItemsQuerySchema, ResponseInputItemListSchema, ResponseDeletedSchema,
} from './responses.js';
export type {
  ResponsesRequest, ResponseInputItem, ResponseObject, ResponseRetrieveQuery, ResponseInputItemsQuery, ResponseInputItemList, ResponseDeleted,
} from './responses.js';
export {
  PoolCapabilitySchema, DEFAULT_POOL_CAPABILITIES, EngineCallKindSchema, ENGINE_CALL_ROUTES, EngineCallSchema, taskCapability, servesCapability,
} from './engine-calls.js';
export type { PoolCapability, EngineCallKind, EngineCall } from './engine-calls.js';
export {
  EmbeddingsRequestSchema, EmbeddingsResponseSchema, RerankRequestSchema, RerankResponseSchema, InfillRequestSchema, InfillResponseSchema,
} from './doors.js';
export type { EmbeddingsRequest, RerankRequest, InfillRequest } from './doors.js';
export {
  ModelAliasSchema,
  ModelServeSchema,
  ModelPolicySchema,
  PoolLoadRequestSchema,
  CatalogLoadRequestSchema,
  CatalogUnloadRequestSchema,
  PoolUnloadQuerySchema,
  NodeMemorySchema,
  PoolOriginSchema,
  PoolDemandFactsSchema,
} from './catalog.js';
export type {
  ModelServe,
  ModelPolicy,
  PoolLoadRequest,
  PoolLoadRequestInput,
  CatalogLoadRequest,
  CatalogUnloadRequest,
  PoolUnloadQuery,
  NodeMemory,
  PoolOrigin,
} from './catalog.js';
