import { describe, expect, it } from 'vitest';
import { BLOCK_CHARS, MAX_BLOCKS, promptBlocks, renderedPrompt } from './prompt-blocks.js';

const text = (seed: string, chars: number): string => seed.repeat(Math.ceil(chars / seed.length)).slice(0, chars);
const system = text('You answer questions about the attached handbook. ', 4 * BLOCK_CHARS);

describe('prompt blocks', () => {
  it('hash the whole rendered conversation: requests sharing a system prompt share its blocks and part where the messages part', () => {
    const a = promptBlocks({
      workload: 'chat',
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: text('first question ', 3 * BLOCK_CHARS) },
      ],
    })!;
    const b = promptBlocks({
      workload: 'chat',
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: text('other question ', 3 * BLOCK_CHARS) },
      ],
    })!;
    expect(a.hashes).toHaveLength(Math.floor(a.chars / BLOCK_CHARS));
    // the system message fills 4 blocks: they are equal, and every block after is different (chained)
    expect(b.hashes.slice(0, 4)).toEqual(a.hashes.slice(0, 4));
    for (let i = 4; i < a.hashes.length; i++) expect(b.hashes[i]).not.toBe(a.hashes[i]);
  });

  it('a conversation prefix longer than its first message matches (the SGLang #26263 case): turn 2 starts with all of turn 1', () => {
    const turn1 = [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: text('tell me about kettles ', 5 * BLOCK_CHARS) },
    ];
    const turn2 = [
      ...turn1,
      { role: 'assistant' as const, content: 'Kettles boil water.' },
      { role: 'user' as const, content: 'More.' },
    ];
    const one = promptBlocks({ workload: 'chat', messages: turn1 })!;
    const two = promptBlocks({ workload: 'chat', messages: turn2 })!;
    expect(one.hashes.length).toBe(5);
    expect(two.hashes.slice(0, one.hashes.length)).toEqual(one.hashes);
    // with the first message alone nothing past it would be shared: the first block here already holds the user text
    expect(renderedPrompt({ workload: 'chat', messages: turn1 })!.indexOf('tell me')).toBeLessThan(BLOCK_CHARS);
  });

  it('roles, names, tools and message boundaries are part of the text: the same words said differently are other prompts', () => {
    const words = text('same words ', 2 * BLOCK_CHARS);
    const asUser = promptBlocks({ workload: 'chat', messages: [{ role: 'user', content: words }] })!;
    const asSystem = promptBlocks({ workload: 'chat', messages: [{ role: 'system', content: words }] })!;
    const withTools = promptBlocks({
      workload: 'chat',
      messages: [{ role: 'user', content: words }],
      sampling: { tools: [{ type: 'function', function: { name: 'lookup' } }] },
    })!;
    const split = promptBlocks({
      workload: 'chat',
      messages: [
        { role: 'user', content: words.slice(0, 100) },
        { role: 'user', content: words.slice(100) },
      ],
    })!;
    expect(asSystem.hashes[0]).not.toBe(asUser.hashes[0]);
    expect(withTools.hashes[0]).not.toBe(asUser.hashes[0]);
    expect(split.hashes[0]).not.toBe(asUser.hashes[0]);
    // content parts render as their text
    const parts = promptBlocks({
      workload: 'chat',
      messages: [{ role: 'user', content: [{ type: 'text', text: words }] }],
    })!;
    expect(parts.hashes).toEqual(asUser.hashes);
  });

  it('a completion prompt is its own text, seeded apart from chats; engine calls and short prompts have no blocks to match', () => {
    const prompt = text('Once upon a time ', 3 * BLOCK_CHARS + 10);
    const p = promptBlocks({ workload: 'completion', prompt })!;
    expect(p.hashes).toHaveLength(3);
    expect(p.chars).toBe(prompt.length);
    const same = promptBlocks({ workload: 'completion', prompt: prompt + ' and then' })!;
    expect(same.hashes.slice(0, 3)).toEqual(p.hashes);
    expect(promptBlocks({ workload: 'completion', prompt: 'short' })!.hashes).toEqual([]);
    expect(promptBlocks({ workload: 'chat', call: { kind: 'embeddings', body: {} }, messages: [] })).toBeUndefined();
    const huge = promptBlocks({ workload: 'completion', prompt: text('x', (MAX_BLOCKS + 10) * BLOCK_CHARS) })!;
    expect(huge.hashes).toHaveLength(MAX_BLOCKS);
  });
});
