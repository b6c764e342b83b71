import { describe, expect, it } from 'vitest';
import { TracingConfigError, tracingSettings } from './tracing-settings.js';

function problems(env: Record<string, string>): readonly string[] {
  try {
    tracingSettings(env);
  } catch (err) {
    if (err instanceof TracingConfigError) return err.problems;
    throw err;
  }
  throw new Error('no TracingConfigError');
}

describe('tracingSettings', () => {
  it('is off when no OTLP endpoint is configured, whatever else is set', () => {
    expect(tracingSettings({})).toEqual({ enabled: false, reason: 'no_endpoint' });
    expect(
      tracingSettings({
        OTEL_SERVICE_NAME: 'x',
        OTEL_RESOURCE_ATTRIBUTES: 'a=b',
        OTEL_TRACES_SAMPLER: 'always_on',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_EXPORTER_OTLP_ENDPOINT: '  ',
      }),
    ).toEqual({ enabled: false, reason: 'no_endpoint' });
  });

  it('is on with either endpoint variable; the per-signal one is used as given', () => {
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toEqual({
      enabled: true,
      protocol: 'http/protobuf',
      endpoint: 'http://collector:4318/v1/traces',
      sampler: 'parentbased_always_on',
    });
    expect(
      tracingSettings({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/ingest',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      }),
    ).toEqual({
      enabled: true,
      protocol: 'http/json',
      endpoint: 'https://traces.example/ingest',
      sampler: 'parentbased_traceidratio',
    });
  });

  it('is on with OTEL_TRACES_EXPORTER=otlp alone (the default endpoint)', () => {
    expect(tracingSettings({ OTEL_TRACES_EXPORTER: 'otlp' })).toMatchObject({
      enabled: true,
      endpoint: 'http://localhost:4318/v1/traces',
    });
  });

  it('OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off even with an endpoint', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(tracingSettings({ ...endpoint, OTEL_SDK_DISABLED: 'TRUE' })).toEqual({
      enabled: false,
      reason: 'sdk_disabled',
    });
    expect(tracingSettings({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' })).toEqual({
      enabled: false,
      reason: 'exporter_none',
    });
    expect(tracingSettings({ ...endpoint, OTEL_SDK_DISABLED: 'false' }).enabled).toBe(true);
  });

  it('the per-signal protocol wins over the general one', () => {
    expect(
      tracingSettings({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      }),
    ).toMatchObject({ enabled: true, protocol: 'http/json' });
  });

  it('refuses grpc with a clear reason', () => {
    expect(() =>
      tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }),
    ).toThrow(
      /OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: no gRPC exporter is installed; use http\/protobuf or http\/json/,
    );
  });

  it('lists every problem at once', () => {
    expect(
      problems({
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'collector:4318',
        OTEL_TRACES_EXPORTER: 'zipkin',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'thrift',
        OTEL_TRACES_SAMPLER: 'sometimes',
        OTEL_SDK_DISABLED: 'maybe',
      }),
    ).toEqual([
      "OTEL_SDK_DISABLED must be true or false, not 'maybe'",
      'OTEL_TRACES_EXPORTER=zipkin is not supported (otlp or none)',
      "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http/protobuf or http/json, not 'thrift'",
      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:// or https:// URL, not 'collector:4318'",
      "OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio, not 'sometimes'",
    ]);
    expect(
      problems({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_TRACES_SAMPLER: 'traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '2',
      }),
    ).toEqual(["OTEL_TRACES_SAMPLER_ARG must be a ratio in [0, 1], not '2'"]);
  });
});
