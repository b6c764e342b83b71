import {
  AnthropicCountTokensRequestSchema,
  AnthropicCountTokensSchema,
  AnthropicErrorSchema,
  AnthropicMessageSchema,
  AnthropicMessagesRequestSchema,
} from '@llama-orch/contracts';
import { withAuth, type RouteSpec } from './routes.js';

const anthropicStream = [
  'With `stream: true`: Server-Sent Events `event: <type>` + `data: <json>`: `message_start` (usage zero: the prompt count comes with the end), `ping`,',
  'per content block (`text`, `thinking`, `tool_use`) `content_block_start`, `content_block_delta`s (`text_delta`, `thinking_delta`, `input_json_delta`) and',
  '`content_block_stop`, then `message_delta` (`stop_reason`, usage) and `message_stop`. The 200 is sent with the first token; a failure after it is one `error` event.',
].join(' ');

const anthropicErrors = { errors: [400, ...withAuth, 404, 413, 429, 500, 502, 503], errorSchema: AnthropicErrorSchema };

/** The Anthropic Messages door of orchestratord: a chat task through the same queue, placement and keys (Bearer or `x-api-key`). */
export const ANTHROPIC: RouteSpec[] = [
  {
    method: 'post',
    path: '/v1/messages',
    summary: 'Anthropic Messages (translated to a chat task; the engine renders and generates)',
    auth: true,
    body: AnthropicMessagesRequestSchema,
    ok: { status: 200, schema: AnthropicMessageSchema, description: 'Without `stream`: one message.' },
    alt: {
      status: 200,
      contentType: 'text/event-stream',
      schema: AnthropicMessageSchema,
      description: anthropicStream,
    },
    ...anthropicErrors,
  },
  {
    method: 'post',
    path: '/v1/messages/count_tokens',
    summary: "Input tokens of a conversation, counted by the engine's tokenizer on a pool serving the model",
    auth: true,
    body: AnthropicCountTokensRequestSchema,
    ok: { status: 200, schema: AnthropicCountTokensSchema },
    ...anthropicErrors,
  },
];
