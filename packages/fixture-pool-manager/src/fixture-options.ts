/**
 * FIXTURE pool-managerd: what a test or benchmark configures (the pools, faults, token text) and
 * what the fixture records of each dispatch.
 */
import type { DispatchRequest, ErrorCode, PoolCapability, PoolState } from '@llama-orch/contracts';
import type { TokenText } from './token-text.js';

export interface FixturePoolSpec {
  pool_id: string;
  models: string[];
  aliases?: string[];
  slots: number;
  deterministic?: boolean;
  ctx?: number;
  decode_tps?: number;
  engine_version?: string;
  state?: PoolState;
  /** Reported in the heartbeat; absent = not reported (chat and completion). */
  capabilities?: PoolCapability[];
  /**
   * Every slot is held by work the fixture does not show: the pool reports ready with 0 free slots
   * and answers a dispatch 503 REPLICA_EXHAUSTED, so tasks for its models wait in orchestratord's
   * queue (the admission benchmark's target). @default false
   */
  busy?: boolean;
}

export type FixtureBehaviour =
  | { readonly kind: 'normal' }
  /** Destroy the socket without any response. */
  | { readonly kind: 'refuse' }
  /** Send 200 headers, then destroy the socket before any token. */
  | { readonly kind: 'crash-before-first-token' }
  /** Stream `tokens` tokens, then destroy the socket. */
  | { readonly kind: 'crash-after-tokens'; readonly tokens: number }
  /** 503 POOL_UNREADY envelope. */
  | { readonly kind: 'unready' }
  /** 503 REPLICA_EXHAUSTED, as pool-managerd answers when every slot is leased. */
  | { readonly kind: 'exhausted' }
  /** Stream `afterTokens` tokens, then an error event. */
  | {
      readonly kind: 'error-event';
      readonly code: ErrorCode;
      readonly retriable: boolean;
      readonly afterTokens: number;
    }
  /** 200 headers, then nothing until the client goes away. */
  | { readonly kind: 'hang' }
  /** Takes the request and never answers, not even headers (a frozen process). */
  | { readonly kind: 'freeze' }
  /** A chat that calls a tool: two `delta.tool_calls` pieces (name, then arguments), then end `tool_calls`. */
  | { readonly kind: 'tool-call' };

export interface FixturePoolManagerOptions {
  nodeId: string;
  pools: FixturePoolSpec[];
  /** Delay between tokens, ms. @default 20 */
  tokenIntervalMs?: number;
  /** Bearer token it requires and sends. */
  token?: string;
  /** Also serve the dispatch route over h2c and register it as `dispatch_h2c`. @default false */
  h2c?: boolean;
  /** What the tokens say and when the first comes (token-text.ts). @default 'words' */
  tokens?: TokenText;
  /**
   * Keep `dispatches`, `aborts`, `completed` and `refusedSaturated`. A benchmark's fixture runs for
   * minutes at thousands of dispatches a second and turns this off, or its memory grows without
   * bound. @default true
   */
  record?: boolean;
}

export interface FixtureDispatch {
  readonly pool_id: string;
  readonly body: DispatchRequest;
  readonly authorization: string | undefined;
  /** The `X-Correlation-Id` header the dispatch carried. */
  readonly correlationId: string | undefined;
  /** `1.1` or `2.0`. */
  readonly httpVersion: string;
  /** The W3C `traceparent` header it carried (orchestratord's dispatch span, with tracing on). */
  readonly traceparent: string | undefined;
}
