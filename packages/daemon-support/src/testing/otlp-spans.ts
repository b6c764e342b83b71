// OTLP trace export requests (JSON, or protobuf decoded by otlp-trace-proto.ts) as plain spans.

/** An attribute value (OTLP AnyValue): 64-bit integers beyond 2^53 as bigint, bytes as Uint8Array, empty as null. */
export type OtlpValue =
  string | number | boolean | bigint | Uint8Array | null | readonly OtlpValue[] | { readonly [key: string]: OtlpValue };

export type OtlpAttributes = Readonly<Record<string, OtlpValue>>;

export type ReceivedSpanKind = 'unspecified' | 'internal' | 'server' | 'client' | 'producer' | 'consumer';

export interface ReceivedEvent {
  readonly time_unix_nano: bigint;
  readonly name: string;
  readonly attributes: OtlpAttributes;
}

export interface ReceivedLink {
  readonly trace_id: string;
  readonly span_id: string;
  readonly trace_state: string | undefined;
  readonly attributes: OtlpAttributes;
}

/** One span as received, the same whichever encoding carried it. Ids are lower-case hex. */
export interface ReceivedSpan {
  readonly trace_id: string;
  readonly span_id: string;
  /** Absent for a root span. */
  readonly parent_span_id: string | undefined;
  readonly trace_state: string | undefined;
  /** W3C trace flags in the low byte (bit 0: sampled), plus OTLP's bits 8–9 (parent is remote). */
  readonly flags: number;
  readonly name: string;
  readonly kind: ReceivedSpanKind;
  readonly start_time_unix_nano: bigint;
  readonly end_time_unix_nano: bigint;
  readonly attributes: OtlpAttributes;
  readonly events: readonly ReceivedEvent[];
  readonly links: readonly ReceivedLink[];
  readonly status: { readonly code: 'unset' | 'ok' | 'error'; readonly message: string | undefined };
  /** The attributes of the resource that sent it (`service.name` …). */
  readonly resource: OtlpAttributes;
  readonly scope: { readonly name: string; readonly version: string | undefined };
  /** How it arrived: `application/json` or `application/x-protobuf`. */
  readonly encoding: 'json' | 'protobuf';
}

/** A body that is not an OTLP trace export request (the receiver answers 400). */
export class OtlpDecodeError extends Error {
  override readonly name = 'OtlpDecodeError';
}

const KINDS: readonly ReceivedSpanKind[] = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'];
const STATUS = ['unset', 'ok', 'error'] as const;

type Loose = Record<string, unknown>;

function obj(v: unknown, where: string): Loose {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new OtlpDecodeError(`${where}: not an object`);
  return v as Loose;
}

function list(v: unknown, where: string): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new OtlpDecodeError(`${where}: not an array`);
  return v;
}

function str(v: unknown, where: string): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new OtlpDecodeError(`${where}: not a string`);
  return v;
}

/**
 * A (u)int64 as OTLP/JSON writes it (a decimal string, or a number: past 2^53 already rounded by
 * the writer) or protobufjs gives it (`longs: String`).
 */
function int64(v: unknown, where: string): bigint {
  if (v === undefined || v === null) return 0n;
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v);
  if (typeof v === 'string' && /^-?\d+$/.test(v)) return BigInt(v);
  throw new OtlpDecodeError(`${where}: not a 64-bit integer`);
}

function enumIndex(v: unknown, names: readonly string[], prefix: string, where: string): number {
  if (v === undefined || v === null) return 0;
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < names.length) return v;
  // Some writers use the enum's name (SPAN_KIND_SERVER, STATUS_CODE_ERROR).
  if (typeof v === 'string') {
    const i = names.indexOf(v.replace(prefix, '').toLowerCase());
    if (i >= 0) return i;
  }
  throw new OtlpDecodeError(`${where}: unknown value ${JSON.stringify(v)}`);
}

function base64Bytes(v: string): Uint8Array {
  return new Uint8Array(Buffer.from(v, 'base64'));
}

/** How an id (`bytes` of a fixed size) is written: hex in OTLP/JSON, base64 once protobuf is decoded. */
type IdReader = (v: unknown, bytes: 8 | 16, where: string) => string | undefined;

const hexId: IdReader = (v, bytes, where) => {
  const s = str(v, where);
  if (s === undefined) return undefined;
  if (new RegExp(`^[0-9a-fA-F]{${bytes * 2}}$`).test(s)) return s.toLowerCase();
  throw new OtlpDecodeError(`${where}: not a ${bytes}-byte hex id`);
};

const base64Id: IdReader = (v, bytes, where) => {
  const s = str(v, where);
  if (s === undefined) return undefined;
  const b = Buffer.from(s, 'base64');
  if (b.length !== bytes) throw new OtlpDecodeError(`${where}: ${b.length} bytes, not ${bytes}`);
  return b.toString('hex');
};

function anyValue(v: unknown, where: string): OtlpValue {
  if (v === undefined || v === null) return null;
  const o = obj(v, where);
  if ('stringValue' in o) return typeof o.stringValue === 'string' ? o.stringValue : '';
  if ('boolValue' in o) return o.boolValue === true;
  if ('intValue' in o) {
    const n = int64(o.intValue, `${where}.intValue`);
    return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
  }
  if ('doubleValue' in o) {
    // OTLP/JSON writes NaN and the infinities as strings.
    const d = typeof o.doubleValue === 'string' ? Number(o.doubleValue) : o.doubleValue;
    if (typeof d !== 'number') throw new OtlpDecodeError(`${where}.doubleValue: not a number`);
    return d;
  }
  if ('arrayValue' in o)
    return list(obj(o.arrayValue, `${where}.arrayValue`).values, `${where}.arrayValue.values`).map((x, i) =>
      anyValue(x, `${where}.arrayValue.values[${i}]`),
    );
  if ('kvlistValue' in o) return attributes(obj(o.kvlistValue, `${where}.kvlistValue`).values, `${where}.kvlistValue`);
  if ('bytesValue' in o) return base64Bytes(str(o.bytesValue, `${where}.bytesValue`) ?? '');
  return null;
}

function attributes(v: unknown, where: string): Record<string, OtlpValue> {
  const out: Record<string, OtlpValue> = {};
  list(v, where).forEach((kv, i) => {
    const o = obj(kv, `${where}[${i}]`);
    const key = str(o.key, `${where}[${i}].key`);
    if (key === undefined) throw new OtlpDecodeError(`${where}[${i}]: no key`);
    out[key] = anyValue(o.value, `${where}[${i}].value`);
  });
  return out;
}

function span(
  v: unknown,
  where: string,
  id: IdReader,
  from: Pick<ReceivedSpan, 'resource' | 'scope' | 'encoding'>,
): ReceivedSpan {
  const s = obj(v, where);
  const traceId = id(s.traceId, 16, `${where}.traceId`);
  const spanId = id(s.spanId, 8, `${where}.spanId`);
  if (traceId === undefined || spanId === undefined) throw new OtlpDecodeError(`${where}: no trace or span id`);
  const status = s.status === undefined || s.status === null ? {} : obj(s.status, `${where}.status`);
  const flags = s.flags ?? 0;
  if (typeof flags !== 'number') throw new OtlpDecodeError(`${where}.flags: not a number`);
  return {
    trace_id: traceId,
    span_id: spanId,
    parent_span_id: id(s.parentSpanId, 8, `${where}.parentSpanId`),
    trace_state: str(s.traceState, `${where}.traceState`),
    flags,
    name: str(s.name, `${where}.name`) ?? '',
    kind: KINDS[enumIndex(s.kind, KINDS, 'SPAN_KIND_', `${where}.kind`)] as ReceivedSpanKind,
    start_time_unix_nano: int64(s.startTimeUnixNano, `${where}.startTimeUnixNano`),
    end_time_unix_nano: int64(s.endTimeUnixNano, `${where}.endTimeUnixNano`),
    attributes: attributes(s.attributes, `${where}.attributes`),
    events: list(s.events, `${where}.events`).map((e, i) => {
      const o = obj(e, `${where}.events[${i}]`);
      return {
        time_unix_nano: int64(o.timeUnixNano, `${where}.events[${i}].timeUnixNano`),
        name: str(o.name, `${where}.events[${i}].name`) ?? '',
        attributes: attributes(o.attributes, `${where}.events[${i}].attributes`),
      };
    }),
    links: list(s.links, `${where}.links`).map((l, i) => {
      const o = obj(l, `${where}.links[${i}]`);
      const linkTrace = id(o.traceId, 16, `${where}.links[${i}].traceId`);
      const linkSpan = id(o.spanId, 8, `${where}.links[${i}].spanId`);
      if (linkTrace === undefined || linkSpan === undefined) throw new OtlpDecodeError(`${where}.links[${i}]: no ids`);
      return {
        trace_id: linkTrace,
        span_id: linkSpan,
        trace_state: str(o.traceState, `${where}.links[${i}].traceState`),
        attributes: attributes(o.attributes, `${where}.links[${i}].attributes`),
      };
    }),
    status: {
      code: STATUS[
        enumIndex(status.code, STATUS, 'STATUS_CODE_', `${where}.status.code`)
      ] as ReceivedSpan['status']['code'],
      message: str(status.message, `${where}.status.message`),
    },
    ...from,
  };
}

/**
 * The spans of one ExportTraceServiceRequest: `body` parsed from OTLP/JSON (`json`) or decoded from
 * protobuf by `decodeTraceRequest` (`protobuf`). Throws {@link OtlpDecodeError} naming the first
 * field that is not what OTLP says.
 */
export function spansOfExport(body: unknown, encoding: 'json' | 'protobuf'): ReceivedSpan[] {
  const id = encoding === 'json' ? hexId : base64Id;
  const out: ReceivedSpan[] = [];
  list(obj(body, 'request').resourceSpans, 'resourceSpans').forEach((rs, i) => {
    const r = obj(rs, `resourceSpans[${i}]`);
    const resource = attributes(
      r.resource === undefined || r.resource === null ? [] : obj(r.resource, `resourceSpans[${i}].resource`).attributes,
      `resourceSpans[${i}].resource.attributes`,
    );
    list(r.scopeSpans, `resourceSpans[${i}].scopeSpans`).forEach((ss, j) => {
      const where = `resourceSpans[${i}].scopeSpans[${j}]`;
      const s = obj(ss, where);
      const sc = s.scope === undefined || s.scope === null ? {} : obj(s.scope, `${where}.scope`);
      const scope = {
        name: str(sc.name, `${where}.scope.name`) ?? '',
        version: str(sc.version, `${where}.scope.version`),
      };
      list(s.spans, `${where}.spans`).forEach((sp, k) => {
        out.push(span(sp, `${where}.spans[${k}]`, id, { resource, scope, encoding }));
      });
    });
  });
  return out;
}
