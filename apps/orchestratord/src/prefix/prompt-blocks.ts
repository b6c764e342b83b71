import { hash } from 'node:crypto';
import type { ChatMessage, Sampling } from '@llama-orch/contracts';

/**
 * A prompt as the prefix index sees it: the chained hashes of its fixed-size blocks of rendered
 * text (.specs/68-prefix-routing.md). Block i's hash covers blocks 0..i, so two prompts share a
 * block hash only when they share everything up to the end of that block, and a pool holding
 * block i's hash held the whole prefix through it.
 */
export interface PromptBlocks {
  /** Chained hashes, first block first; at most {@link MAX_BLOCKS}. */
  readonly hashes: readonly string[];
  /** Characters of the rendered prompt (all of it, also past the last whole block). */
  readonly chars: number;
}

/** Characters per block: about 64 tokens of English text (llama.cpp's cache reuse is per token; this is the index's grain). */
export const BLOCK_CHARS = 256;
/** Blocks hashed per prompt at most (128 KiB of text): what lies past them is never matched, only evaluated. */
export const MAX_BLOCKS = 512;

/** What a task carries that becomes the engine's prompt (a TaskRequest has these fields). */
export interface PromptSource {
  readonly workload: 'chat' | 'completion';
  readonly prompt?: string | undefined;
  readonly messages?: readonly ChatMessage[] | undefined;
  readonly sampling?: Pick<Sampling, 'tools'> | undefined;
  /** Engine calls (embeddings, rerank, infill) have no prompt the index matches. */
  readonly call?: unknown;
}

/** Separators no chat text carries, so `[a, bc]` and `[ab, c]` render differently. */
const MESSAGE = '\u001e';
const FIELD = '\u001f';

function contentText(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  let out = '';
  for (const part of content)
    out += part.type === 'text' && typeof part.text === 'string' ? part.text : JSON.stringify(part);
  return out;
}

/**
 * The prompt in the order a chat template lays it out: the tools first (templates put them in the
 * system preamble), then each message's role, name, content and tool calls, in turn. A template is
 * a function of this sequence that writes it front to back, so two requests share a rendered prefix
 * exactly when they share a prefix of this text, up to the template's own markup; hashing only the
 * first message would miss every prefix longer than it (SGLang #26263).
 */
export function renderedPrompt(source: PromptSource): string | undefined {
  if (source.call !== undefined) return undefined;
  if (source.workload === 'completion') return source.prompt;
  const messages = source.messages;
  if (messages === undefined) return undefined;
  const parts: string[] = [];
  const tools = source.sampling?.tools;
  if (tools !== undefined && tools.length > 0) parts.push(`tools${FIELD}${JSON.stringify(tools)}`);
  for (const m of messages) {
    let text = `${m.role}${FIELD}${m.name ?? ''}${FIELD}${contentText(m.content)}`;
    if (m.tool_calls !== undefined) text += `${FIELD}${JSON.stringify(m.tool_calls)}`;
    if (m.tool_call_id !== undefined) text += `${FIELD}${m.tool_call_id}`;
    parts.push(text);
  }
  return parts.join(MESSAGE) + MESSAGE;
}

/** The prompt's blocks, or undefined for a task without one (engine calls). */
export function promptBlocks(source: PromptSource): PromptBlocks | undefined {
  const text = renderedPrompt(source);
  if (text === undefined) return undefined;
  const whole = Math.min(MAX_BLOCKS, Math.floor(text.length / BLOCK_CHARS));
  const hashes: string[] = new Array<string>(whole);
  // Seeded with the workload: a completion prompt that happens to spell a chat's rendering is another prompt to the engine.
  let previous: string = source.workload;
  for (let i = 0; i < whole; i++) {
    const block = text.slice(i * BLOCK_CHARS, (i + 1) * BLOCK_CHARS);
    previous = hash('sha1', previous + block, 'base64url').slice(0, 16);
    hashes[i] = previous;
  }
  return { hashes, chars: text.length };
}
