import { describe, expect, it } from 'vitest';
import { SamplingSchema, toolName } from './index.js';

describe('SamplingSchema: tools and tool_choice', () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }];

  it('takes the string choices and a named function that is among tools', () => {
    for (const tool_choice of ['none', 'auto', 'required'] as const) expect(SamplingSchema.safeParse({ tools, tool_choice }).success).toBe(true);
    expect(SamplingSchema.parse({ tools, tool_choice: { type: 'function', function: { name: 'get_weather' } } }).tool_choice).toEqual({
      type: 'function',
      function: { name: 'get_weather' },
    });
  });

  it('refuses a named function that is not among tools, and other object forms, at tool_choice', () => {
    for (const tool_choice of [{ type: 'function', function: { name: 'nope' } }, { type: 'allowed_tools' }, 'sometimes']) {
      const r = SamplingSchema.safeParse({ tools, tool_choice });
      expect(r.success, JSON.stringify(tool_choice)).toBe(false);
      expect(r.error?.issues[0]?.path, JSON.stringify(tool_choice)).toEqual(['tool_choice']);
    }
    expect(SamplingSchema.safeParse({ tool_choice: { type: 'function', function: { name: 'get_weather' } } }).success).toBe(false);
  });

  it('toolName reads an OpenAI function tool’s name', () => {
    expect(toolName(tools[0]!)).toBe('get_weather');
    expect(toolName({ type: 'function' })).toBeUndefined();
  });
});
