import fc from 'fast-check';

/**
 * fast-check arbitraries of hostile request parts. Sizes stay below the services' body limits
 * unless a case is about the limit itself, so each run is one cheap loopback request.
 */

/** Deeply nested arrays/objects as JSON text (built directly: fast-check would recurse). */
export const deepJson: fc.Arbitrary<string> = fc
  .record({ depth: fc.integer({ min: 50, max: 20_000 }), kind: fc.constantFrom('array', 'object', 'mixed') })
  .map(({ depth, kind }) => {
    if (kind === 'array') return `${'['.repeat(depth)}${']'.repeat(depth)}`;
    if (kind === 'object') return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    return `{"task_id":${'[{"x":'.repeat(depth)}0${'}]'.repeat(depth)}}`;
  });

/** Strings that break naive handling: huge, control chars, lone surrogates, path tricks, injections. */
export const nastyString: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 64 }),
  fc.string({ unit: 'binary', maxLength: 64 }),
  fc.integer({ min: 1000, max: 300_000 }).map((n) => 'x'.repeat(n)),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    '\ud800',
    '\udfff\ud800',
    '../../../../etc/passwd',
    '..%2F..%2Fetc',
    '%00',
    '\r\nX-Injected: 1',
    '${jndi:ldap://x}',
    '<script>',
    "' OR 1=1 --",
    '__proto__',
    'constructor',
    'NaN',
    'Infinity',
    '-0',
    '1e309',
    '\u202e',
    '\ufeff',
    'ﬀ'.repeat(1000),
    '🦙'.repeat(5000),
  ),
);

/** Any JSON-ish value, including big numbers, huge strings and arrays. */
export const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 2, arbitrary: nastyString },
  {
    weight: 1,
    arbitrary: fc.constantFrom(Number.MAX_SAFE_INTEGER + 2, -1, 0, 1.5, 2 ** 31, -(2 ** 63), 1e308, true, false, null),
  },
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 50_000 }).map((n) => Array.from({ length: n }, (_, i) => i)) },
  { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 5 }) },
);

export type Mutation =
  | { kind: 'set'; key: string | undefined; value: unknown }
  | { kind: 'delete'; key: string | undefined }
  | { kind: 'extra'; key: string; value: unknown }
  | { kind: 'proto' };

/** One change to a valid body: a field with a wrong value, a missing field, an unknown field, a prototype trick. */
export const mutation: fc.Arbitrary<Mutation[]> = fc.array(
  fc.oneof(
    {
      weight: 5,
      arbitrary: fc.record({
        kind: fc.constant('set' as const),
        key: fc.option(fc.string({ maxLength: 4 }), { nil: undefined }),
        value: anyValue,
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('delete' as const),
        key: fc.option(fc.string({ maxLength: 4 }), { nil: undefined }),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('extra' as const),
        key: fc.string({ minLength: 1, maxLength: 12 }),
        value: anyValue,
      }),
    },
    { weight: 1, arbitrary: fc.constant({ kind: 'proto' as const }) },
  ),
  { minLength: 1, maxLength: 3 },
);

/** Applies mutations; `key: undefined` picks an existing key by the hash of the mutation index. */
export function applyMutations(valid: Record<string, unknown>, muts: readonly Mutation[]): string {
  const body: Record<string, unknown> = { ...valid };
  const keys = Object.keys(valid);
  muts.forEach((m, i) => {
    const pick = (k: string | undefined): string =>
      k === undefined || k.length === 0
        ? (keys[i % keys.length] ?? 'x')
        : (keys.find((x) => x.startsWith(k)) ?? keys[k.length % keys.length] ?? 'x');
    if (m.kind === 'set') body[pick(m.key)] = m.value;
    else if (m.kind === 'delete') delete body[pick(m.key)];
    else if (m.kind === 'extra') body[m.key] = m.value;
  });
  const text = JSON.stringify(body);
  if (muts.some((m) => m.kind === 'proto'))
    return text.replace(/^\{/, '{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}},');
  return text;
}

/** Bytes that are not valid UTF-8, spliced into a JSON string value. */
export const invalidUtf8Body: fc.Arbitrary<Buffer> = fc
  .record({
    bad: fc.constantFrom(
      [0xff],
      [0xc3, 0x28],
      [0xa0, 0xa1],
      [0xe2, 0x28, 0xa1],
      [0xf0, 0x28, 0x8c, 0x28],
      [0xc0, 0xaf],
      [0xed, 0xa0, 0x80],
      [0xf8, 0x88, 0x80, 0x80, 0x80],
      [0xfe, 0xfe, 0xff, 0xff],
    ),
    field: fc.constantFrom('prompt', 'model_ref', 'task_id', 'new_model_ref', 'node_id', 'ref', 'x'),
    repeat: fc.integer({ min: 1, max: 50 }),
  })
  .map(({ bad, field, repeat }) =>
    Buffer.concat([
      Buffer.from(`{"${field}":"`),
      Buffer.from(Array.from({ length: repeat }, () => bad).flat()),
      Buffer.from('"}'),
    ]),
  );

/** Content types a JSON route may be sent. */
export const contentType: fc.Arbitrary<string | undefined> = fc.constantFrom(
  undefined,
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=latin1',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/octet-stream',
  'application/xml',
  'application/json-patch+json',
  'text/event-stream',
  '*/*',
  'application/ json',
  ';;;',
  'a'.repeat(2000),
);

/** Bodies as bytes: truncated JSON, non-JSON text, BOM, empty, NUL bytes. */
export const rawBody: fc.Arbitrary<Buffer> = fc.oneof(
  fc
    .constantFrom(
      '',
      '{',
      '{"a":',
      '[',
      'null',
      'true',
      '0',
      '"x"',
      '{}',
      '[]',
      'a=1&b=2',
      '<xml/>',
      '\ufeff{}',
      '{"a":1}{"b":2}',
      '{"a":1,}',
      "{'a':1}",
      'NaN',
      '{"a":1e999999}',
    )
    .map((s) => Buffer.from(s)),
  fc.uint8Array({ maxLength: 512 }).map((a) => Buffer.from(a)),
  deepJson.map((s) => Buffer.from(s)),
);

/** Path segments for `{id}`: valid-looking, encoded tricks, traversal, very long. */
export const pathId: fc.Arbitrary<string> = fc.oneof(
  fc.uuid(),
  fc.string({ maxLength: 40 }),
  fc.constantFrom(
    '..',
    '../..',
    '%2e%2e',
    '.',
    '',
    ' ',
    'p1/../p2',
    'a'.repeat(5000),
    'ü',
    '\u0000',
    'x?y=1',
    'x#y',
    'CON',
    'null',
    'undefined',
  ),
);

/** Methods the HTTP parser accepts, most of which no route serves. */
export const method: fc.Arbitrary<string> = fc.constantFrom(
  'GET',
  'POST',
  'PUT',
  'PATCH',
  'DELETE',
  'OPTIONS',
  'HEAD',
  'PROPFIND',
  'MKCOL',
  'COPY',
  'MOVE',
  'LOCK',
  'SEARCH',
  'PURGE',
);

/** Odd request targets: traversal, encodings, duplicated slashes, huge queries. */
export const oddPath: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '/',
    '//',
    '/v2',
    '/v2/',
    '/v2//tasks',
    '/v2/tasks/',
    '/v2/./tasks',
    '/v2/../v2/pools',
    '/v2/%2e%2e/metrics',
    '/%00',
    '/v2/tasks/%ZZ/events',
    '/v2/pools/%/health',
    '/v2/pools/%E0%A4%A/health',
    '/metrics/',
    '/METRICS',
    '/v2/pools?x=' + 'y'.repeat(8000),
    '/health?' + '&a=1'.repeat(1000),
    '/v2/nodes/' + 'n'.repeat(3000) + '/heartbeat',
    '/v2/tasks/x/events?verbose=maybe',
    '/v2/tasks/x/events?last_event_id=-1',
    '/v2/catalog/models/..%2F..%2Fetc%2Fpasswd',
    '/v2/catalog/models/%2e%2e%2f%2e%2e%2fetc',
    '/v2/sessions/%00%00',
    '/*',
    '/v2/pools/*',
  ),
  fc.webPath().map((p) => (p.startsWith('/') ? p : `/${p}`)),
  fc
    .array(
      fc.string({ maxLength: 10 }).map((s) => encodeURIComponent(s)),
      { maxLength: 6 },
    )
    .map((segs) => `/${segs.join('/')}`),
);
