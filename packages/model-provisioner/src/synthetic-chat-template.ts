/**
 * The chat template written to `tokenizer.chat_template`: plain role lines (`System: …`,
 * `User: …`, `Tool: …`), with the assistant cue `Assistant:` before every assistant turn and at the
 * end when the conversation awaits a reply. llama-server renders it with `--jinja` (its
 * `/apply-template` shows the prompt), so chat requests exercise real template rendering.
 *
 * The cue is emitted whether or not `add_generation_prompt` is set, as Llama-2's and Mistral's
 * templates do, so the engine's "generation prompt" (the text `add_generation_prompt` adds) is
 * empty. That is required: with `response_format` the engine's grammar starts with the generation
 * prompt and is primed with its tokens, dropping the first token when its piece begins with a space
 * the text does not have; this vocab's SentencePiece tokenizer prefixes a space, so any generation
 * prompt starting with a letter or `<` (ChatML's `<|im_start|>assistant`, or `Assistant:`) loses its
 * first token and the engine answers 400 "Failed to initialize samplers" (measured, llama.cpp 0.5.0).
 * Content that is not a string (null next to tool calls; parts are joined by the engine) renders as ''.
 */
export const SYNTHETIC_CHAT_TEMPLATE = [
  '{%- for message in messages -%}',
  "{%- set content = message.content if message.content is string else '' -%}",
  "{%- if message.role == 'assistant' -%}",
  "{{- ' ' + content + '\\n' -}}",
  '{%- else -%}',
  "{{- message.role | capitalize + ': ' + content + '\\n' -}}",
  '{%- endif -%}',
  "{%- if (loop.last and message.role != 'assistant') or (not loop.last and messages[loop.index0 + 1].role == 'assistant') -%}",
  "{{- 'Assistant:' -}}",
  '{%- endif -%}',
  '{%- endfor -%}',
].join('\n');

/**
 * The template written to `tokenizer.chat_template.tool_use`, which llama-server renders instead of
 * the default one when a request offers `tools`. Its tool-call format is one its differential
 * autoparser (llama.cpp `common/chat-diff-analyzer.cpp`) reads from the template itself: JSON-native
 * calls `{"name": …, "arguments": …}` after the marker `¶`, so the engine builds its own parser and
 * grammar for the offered tools (`tool_choice` `auto` → a lazy grammar triggered by the marker,
 * `required` or a named function → a grammar from the first token).
 *
 * Why this shape, for a model whose weights are noise: such a model repeats the prompt's last token
 * (its residual stream is that token's embedding, read back through the tied output), so the cue
 * before an answer ends with the marker itself (`Assistant¶`); under the grammar the marker is the
 * only way to emit that token, and the engine's grammar then writes a call that fits the tool's
 * JSON schema. The marker is one character whose space-prefixed form is two tokens (` ` + `¶`), so
 * the engine takes it as a trigger word rather than a trigger token the model never emits, and it
 * cannot overlap itself (a marker like `:::` lets the grammar accept `::` + `:::`, which the parser
 * then splits at the first `:::` and rejects). One call per turn (only the first is rendered), so
 * the engine's default `parallel_tool_calls` is false and generation ends after the call. After a
 * tool's result the cue ends in `.` instead, so the follow-up turn answers with text (noise).
 */
export const SYNTHETIC_TOOL_USE_TEMPLATE = [
  '{%- for message in messages -%}',
  "{%- set content = message.content if message.content is string else '' -%}",
  "{%- if message.role == 'assistant' -%}",
  '{%- if message.tool_calls -%}',
  '{%- set call = message.tool_calls[0].function if message.tool_calls[0].function is defined else message.tool_calls[0] -%}',
  '{{- \'¶{"name": "\' + call.name + \'", "arguments": \' + (call.arguments if call.arguments is string else call.arguments | tojson) + \'}\' -}}',
  '{%- else -%}',
  "{{- ' ' + content -}}",
  '{%- endif -%}',
  "{{- '\\n' -}}",
  '{%- else -%}',
  "{{- message.role | capitalize + ': ' + content + '\\n' -}}",
  '{%- endif -%}',
  "{%- if (loop.last and message.role != 'assistant') or (not loop.last and messages[loop.index0 + 1].role == 'assistant') -%}",
  "{{- 'Assistant, from the tool results.' if message.role == 'tool' else 'Assistant¶' -}}",
  '{%- endif -%}',
  '{%- endfor -%}',
].join('\n');
