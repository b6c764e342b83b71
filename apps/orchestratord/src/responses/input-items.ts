import type { ResponseInputItem, ResponseInputItemList, ResponseInputItemsQuery } from '@llama-orch/contracts';
import { InvalidParamsError } from '../errors.js';

/**
 * A stored response's items, as OpenAI's API lists them and as a later turn reads them back:
 * - the request's `input` as listed by `GET /v1/responses/{id}/input_items` (every item with an
 *   `id` and `status: completed`; a string input is one user message with an `input_text` part;
 *   text content becomes one part, `input_text` or, from the assistant, `output_text`);
 * - the output of a response as input items of the next turn (`previous_response_id`): its message
 *   items as assistant messages, its function calls as `function_call` items; reasoning items are
 *   left out (the chat template renders the conversation without them).
 */

export type ListedItem = Record<string, unknown> & { readonly id: string };

type Part = { type: string; text: string };

function parts(content: string | Part[], role: string): Part[] {
  if (typeof content !== 'string') return content.map((p) => ({ type: p.type, text: p.text }));
  return [{ type: role === 'assistant' ? 'output_text' : 'input_text', text: content }];
}

/** The id an item carries, or a new one unique in the response (`<prefix>_<response key>_<index>`). */
function idOf(item: ResponseInputItem, prefix: string, key: string, index: number): string {
  const given = (item as { id?: unknown }).id;
  return typeof given === 'string' && given !== '' ? given : `${prefix}_${key}_${index}`;
}

/** The request's input items as the list shows them; `key` makes the ids of this response's items (its task id without dashes). */
export function listedInputItems(items: readonly ResponseInputItem[], key: string): ListedItem[] {
  return items.map((item, i) => {
    if (item.type === 'function_call')
      return {
        id: idOf(item, 'fc', key, i),
        type: 'function_call',
        status: 'completed',
        call_id: item.call_id,
        name: item.name,
        arguments: item.arguments,
      };
    if (item.type === 'function_call_output') {
      const output = typeof item.output === 'string' ? item.output : parts(item.output, 'tool');
      return {
        id: idOf(item, 'fco', key, i),
        type: 'function_call_output',
        status: 'completed',
        call_id: item.call_id,
        output,
      };
    }
    const message = item as Extract<ResponseInputItem, { role: string }>;
    return {
      id: idOf(item, 'msg', key, i),
      type: 'message',
      role: message.role,
      status: 'completed',
      content: parts(message.content, message.role),
    };
  });
}

/** A response's output items as the input items a later turn sends in their place. */
export function outputAsInput(output: readonly unknown[]): ResponseInputItem[] {
  const items: ResponseInputItem[] = [];
  for (const raw of output) {
    const item = raw as { type?: unknown; content?: unknown; call_id?: unknown; name?: unknown; arguments?: unknown };
    if (item.type === 'message' && Array.isArray(item.content)) {
      const text = (item.content as Array<{ text?: unknown }>)
        .map((p) => (typeof p.text === 'string' ? p.text : ''))
        .join('');
      items.push({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] });
    } else if (item.type === 'function_call') {
      items.push({
        type: 'function_call',
        call_id: String(item.call_id ?? ''),
        name: String(item.name ?? ''),
        arguments: String(item.arguments ?? ''),
      });
    }
  }
  return items;
}

/**
 * One page of `items` (in the order sent) as `GET …/input_items` answers: `order` desc lists the last
 * first; `after`/`before` are item ids in that order (an id not in the list is the client's mistake:
 * 400 naming the parameter).
 */
export function inputItemsPage(items: readonly ListedItem[], query: ResponseInputItemsQuery): ResponseInputItemList {
  const ordered = query.order === 'asc' ? items : [...items].reverse();
  const position = (id: string | undefined, param: 'after' | 'before'): number | undefined => {
    if (id === undefined) return undefined;
    const at = ordered.findIndex((item) => item.id === id);
    if (at < 0) throw new InvalidParamsError(`${param}: no input item '${id}' in this response`, { param });
    return at;
  };
  const from = (position(query.after, 'after') ?? -1) + 1;
  const to = position(query.before, 'before') ?? ordered.length;
  const window = ordered.slice(from, Math.max(from, to));
  const data = window.slice(0, query.limit);
  return {
    object: 'list',
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: window.length > data.length,
  };
}
