import { KeysFileSchema } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { parseKeysText } from './keys-yaml.js';

const HEX = 'ab'.repeat(32);

describe('keys file text', () => {
  it('reads the documented block YAML (comments, quotes, integers)', () => {
    const text = [
      '# client keys',
      'keys:',
      '  - name: alice   # the web app',
      `    key_sha256: "${HEX}"`,
      '    rate_limit: 60',
      '',
      '  - name: ops',
      "    key_env: 'LLORCH_OPS_KEY'",
      '    role: operator',
      '    max_priority: batch',
    ].join('\n');
    expect(KeysFileSchema.parse(parseKeysText(text))).toEqual({
      keys: [
        { name: 'alice', key_sha256: HEX, rate_limit: 60, role: 'client', max_priority: 'interactive' },
        { name: 'ops', key_env: 'LLORCH_OPS_KEY', role: 'operator', max_priority: 'batch' },
      ],
    });
  });

  it('reads JSON', () => {
    expect(parseKeysText(JSON.stringify({ keys: [{ name: 'a', key_env: 'A' }] }))).toEqual({ keys: [{ name: 'a', key_env: 'A' }] });
  });

  it('refuses what it does not read, with the line', () => {
    expect(() => parseKeysText('users:\n  - name: a')).toThrow(/line 1: expected 'keys:'/);
    expect(() => parseKeysText('keys:\n  name: a')).toThrow(/line 2: expected a list item/);
    expect(() => parseKeysText('keys:\n  - name: a\n    name: b')).toThrow(/line 3: 'name' given twice/);
    expect(() => parseKeysText('keys:\n  - name: [a, b]')).toThrow(/line 2: unsupported YAML value/);
    expect(() => parseKeysText('keys:\n  - name: "a')).toThrow(/unterminated/);
  });
});
