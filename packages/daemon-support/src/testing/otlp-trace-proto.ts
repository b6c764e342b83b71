import protobuf from 'protobufjs';

// The OTLP trace export request as a protobufjs JSON descriptor, hand-written from
// opentelemetry-proto (collector/trace/v1/trace_service.proto, trace/v1/trace.proto,
// common/v1/common.proto, resource/v1/resource.proto): only what a trace export carries. Field
// names are the lowerCamelCase of OTLP/JSON, so a decoded protobuf body and a parsed JSON body have
// the same keys. Enums (SpanKind, Status.code) are read as their numbers (same varint on the wire).

const repeated = (type: string, id: number) => ({ rule: 'repeated', type, id });
const field = (type: string, id: number) => ({ type, id });

const DESCRIPTOR = {
  nested: {
    otlp: {
      nested: {
        ExportTraceServiceRequest: { fields: { resourceSpans: repeated('ResourceSpans', 1) } },
        ResourceSpans: {
          fields: {
            resource: field('Resource', 1),
            scopeSpans: repeated('ScopeSpans', 2),
            schemaUrl: field('string', 3),
          },
        },
        Resource: { fields: { attributes: repeated('KeyValue', 1), droppedAttributesCount: field('uint32', 2) } },
        ScopeSpans: {
          fields: {
            scope: field('InstrumentationScope', 1),
            spans: repeated('Span', 2),
            schemaUrl: field('string', 3),
          },
        },
        InstrumentationScope: {
          fields: {
            name: field('string', 1),
            version: field('string', 2),
            attributes: repeated('KeyValue', 3),
            droppedAttributesCount: field('uint32', 4),
          },
        },
        Span: {
          fields: {
            traceId: field('bytes', 1),
            spanId: field('bytes', 2),
            traceState: field('string', 3),
            parentSpanId: field('bytes', 4),
            flags: field('fixed32', 16),
            name: field('string', 5),
            kind: field('int32', 6),
            startTimeUnixNano: field('fixed64', 7),
            endTimeUnixNano: field('fixed64', 8),
            attributes: repeated('KeyValue', 9),
            droppedAttributesCount: field('uint32', 10),
            events: repeated('Event', 11),
            droppedEventsCount: field('uint32', 12),
            links: repeated('Link', 13),
            droppedLinksCount: field('uint32', 14),
            status: field('Status', 15),
          },
        },
        Event: {
          fields: {
            timeUnixNano: field('fixed64', 1),
            name: field('string', 2),
            attributes: repeated('KeyValue', 3),
            droppedAttributesCount: field('uint32', 4),
          },
        },
        Link: {
          fields: {
            traceId: field('bytes', 1),
            spanId: field('bytes', 2),
            traceState: field('string', 3),
            attributes: repeated('KeyValue', 4),
            droppedAttributesCount: field('uint32', 5),
            flags: field('fixed32', 6),
          },
        },
        // Field 1 is reserved (the deprecated code).
        Status: { fields: { message: field('string', 2), code: field('int32', 3) } },
        KeyValue: { fields: { key: field('string', 1), value: field('AnyValue', 2) } },
        AnyValue: {
          oneofs: {
            value: {
              oneof: ['stringValue', 'boolValue', 'intValue', 'doubleValue', 'arrayValue', 'kvlistValue', 'bytesValue'],
            },
          },
          fields: {
            stringValue: field('string', 1),
            boolValue: field('bool', 2),
            intValue: field('int64', 3),
            doubleValue: field('double', 4),
            arrayValue: field('ArrayValue', 5),
            kvlistValue: field('KeyValueList', 6),
            bytesValue: field('bytes', 7),
          },
        },
        ArrayValue: { fields: { values: repeated('AnyValue', 1) } },
        KeyValueList: { fields: { values: repeated('KeyValue', 1) } },
      },
    },
  },
};

const REQUEST = protobuf.Root.fromJSON(DESCRIPTOR).lookupType('otlp.ExportTraceServiceRequest');

/**
 * An `application/x-protobuf` ExportTraceServiceRequest as a plain object shaped like its OTLP/JSON
 * form, except for the encodings of scalars: bytes as base64 strings (ids included; OTLP/JSON
 * writes ids as hex), 64-bit integers as decimal strings, enums as numbers. Throws on a body that is
 * not a valid message.
 */
export function decodeTraceRequest(body: Uint8Array): unknown {
  return REQUEST.toObject(REQUEST.decode(body), { longs: String, bytes: String, enums: Number, arrays: true });
}
