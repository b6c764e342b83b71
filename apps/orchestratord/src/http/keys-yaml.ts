/**
 * Reads orchestratord's keys file: JSON, or the block YAML the docs show —
 *
 * ```yaml
 * keys:            # comments anywhere
 *   - name: alice
 *     key_sha256: "9f86…"
 *     rate_limit: 60
 *   - name: ops
 *     key_env: LLORCH_OPS_KEY
 *     role: operator
 * ```
 *
 * — a list of flat maps under `keys:`, scalars plain or quoted (integers become numbers). Anything
 * else is refused with its line number. A stand-in: orchestratord has no YAML parser dependency;
 * with one (`yaml`, as pool-managerd uses) this file goes and every YAML form is read.
 */
export function parseKeysText(text: string): unknown {
  if (text.trimStart().startsWith('{')) return JSON.parse(text) as unknown;
  const keys: Record<string, unknown>[] = [];
  let sawKeys = false;
  let current: Record<string, unknown> | undefined;
  let itemIndent = -1;
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, i) => {
    const fail = (why: string): never => {
      throw new Error(`line ${i + 1}: ${why}`);
    };
    const line = stripComment(raw);
    if (line.trim() === '') return;
    const indent = line.length - line.trimStart().length;
    const body = line.trim();
    if (!sawKeys) {
      if (indent !== 0 || body !== 'keys:') fail("expected 'keys:' first");
      sawKeys = true;
      return;
    }
    if (body.startsWith('- ')) {
      if (indent === 0 || (itemIndent >= 0 && indent !== itemIndent)) fail('list items under keys: must share one indentation');
      itemIndent = indent;
      current = {};
      keys.push(current);
      setPair(current, body.slice(2).trim(), fail);
      return;
    }
    if (current === undefined || indent <= itemIndent) fail('expected a list item (- name: …) under keys:');
    setPair(current as Record<string, unknown>, body, fail);
  });
  if (!sawKeys) throw new Error("expected 'keys:'");
  return { keys };
}

function setPair(target: Record<string, unknown>, pair: string, fail: (why: string) => never): void {
  const m = /^([A-Za-z_][A-Za-z0-9_]*):\s+(.+)$/.exec(pair);
  if (m?.[1] === undefined || m[2] === undefined) return fail(`expected 'field: value', got '${pair.slice(0, 40)}'`);
  if (m[1] in target) fail(`'${m[1]}' given twice`);
  target[m[1]] = scalar(m[2].trim(), fail);
}

function scalar(v: string, fail: (why: string) => never): unknown {
  const q = v[0];
  if (q === '"' || q === "'") {
    if (v.length < 2 || v[v.length - 1] !== q) fail('unterminated quoted value');
    return v.slice(1, -1);
  }
  if (/^-?\d+$/.test(v)) return Number(v);
  if (/^[[{&*!|>%@`]/.test(v)) fail(`unsupported YAML value '${v.slice(0, 20)}' (write the file as JSON or in the documented form)`);
  return v;
}

/** The line without a `#` comment (one at the start or after a blank, outside quotes). */
function stripComment(line: string): string {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || line[i - 1] === ' ' || line[i - 1] === '\t')) return line.slice(0, i);
  }
  return line;
}
