import type { DispatchRequest } from '@llama-orch/contracts';

/** The FIXTURE's idea of prompt tokens: the prompt's (or the rendered conversation's) words. */
export function promptWords(body: DispatchRequest): string[] {
  const text =
    body.workload === 'chat'
      ? (body.messages ?? [])
          .map((m) => `${m.role}: ${typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? '')}`)
          .join('\n')
      : (body.prompt ?? '');
  return text.split(/\s+/).filter((w) => w !== '');
}

/**
 * A FIXTURE pool's prompt cache: the last `capacity` prompts it ran (one per slot, as llama-server
 * keeps one per slot), so an end event can report cached tokens as a real prompt cache would.
 */
export class PromptCache {
  readonly #prompts: (readonly string[])[] = [];
  #next = 0;

  constructor(readonly capacity: number) {}

  /** Words `prompt` shares from the start with the closest cached prompt; then caches it, evicting the oldest. */
  take(prompt: readonly string[]): number {
    let cached = 0;
    for (const c of this.#prompts) cached = Math.max(cached, commonPrefix(c, prompt));
    if (this.capacity > 0) {
      this.#prompts[this.#next] = prompt;
      this.#next = (this.#next + 1) % this.capacity;
    }
    return cached;
  }
}

/** Words a prompt shares with a cached one from the start: what a real engine would not evaluate again. */
function commonPrefix(a: readonly string[], b: readonly string[]): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n += 1;
  return n;
}
