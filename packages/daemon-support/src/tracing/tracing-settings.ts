// What the standard OTEL_* variables ask of tracing, decided before any SDK code is loaded.
// Node built-ins only: a daemon with tracing off reads this and nothing more.

/** The OTLP encodings the installed exporters speak. */
export type OtlpProtocol = 'http/protobuf' | 'http/json';

/** The samplers the SDK builds from `OTEL_TRACES_SAMPLER` (it reads the variable itself). */
export const TRACES_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

export type TracesSampler = (typeof TRACES_SAMPLERS)[number];

/**
 * Tracing off (`reason`: nothing asks for it, `OTEL_SDK_DISABLED=true`, or `OTEL_TRACES_EXPORTER=none`)
 * or on, with the endpoint and encoding the exporter will use (for the start-up line: the exporter
 * reads the same variables itself).
 */
export type TracingSettings =
  | { readonly enabled: false; readonly reason: 'no_endpoint' | 'sdk_disabled' | 'exporter_none' }
  | {
      readonly enabled: true;
      readonly protocol: OtlpProtocol;
      /** Where spans are POSTed: the per-signal endpoint as given, else the base endpoint + `/v1/traces`. */
      readonly endpoint: string;
      readonly sampler: TracesSampler;
    };

/** The OTEL_* variables ask for something this build cannot do; every problem is listed at once. */
export class TracingConfigError extends Error {
  override readonly name = 'TracingConfigError';
  readonly code = 'TRACING_CONFIG';
  constructor(readonly problems: readonly string[]) {
    super(`tracing: ${problems.join('; ')}`);
  }
}

/** The OTLP/HTTP default endpoint (a collector on this host). */
export const DEFAULT_OTLP_ENDPOINT = 'http://localhost:4318';

type Env = Readonly<Record<string, string | undefined>>;

/** A variable's value; blank counts as unset (as the SDK reads it). */
function value(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v === undefined || v === '' ? undefined : v;
}

/**
 * Reads the OTEL_* variables that decide whether tracing runs and how it exports. Tracing is on
 * when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set, or when
 * `OTEL_TRACES_EXPORTER=otlp` asks for it explicitly (then the default endpoint,
 * {@link DEFAULT_OTLP_ENDPOINT}); `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it
 * off whatever else is set. Nothing set: off (the daemons never export to a default endpoint
 * nobody asked for).
 *
 * When on, the settings are checked as a whole and every problem is thrown at once
 * ({@link TracingConfigError}): a protocol other than `http/protobuf` (default) or `http/json`
 * (`grpc` has no exporter installed), an exporter other than `otlp`/`none`, an endpoint that is not
 * an http(s) URL, an unknown `OTEL_TRACES_SAMPLER` or a ratio `OTEL_TRACES_SAMPLER_ARG` outside
 * [0, 1]. The SDK would fall back silently on most of these; a daemon refuses to start instead.
 */
export function tracingSettings(env: Env): TracingSettings {
  const disabled = value(env, 'OTEL_SDK_DISABLED')?.toLowerCase();
  if (disabled === 'true') return { enabled: false, reason: 'sdk_disabled' };
  const problems: string[] = [];
  if (disabled !== undefined && disabled !== 'false')
    problems.push(`OTEL_SDK_DISABLED must be true or false, not '${disabled}'`);
  const exporter = value(env, 'OTEL_TRACES_EXPORTER')?.toLowerCase();
  if (exporter === 'none') return { enabled: false, reason: 'exporter_none' };
  const signalEndpoint = value(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const baseEndpoint = value(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (exporter === undefined && signalEndpoint === undefined && baseEndpoint === undefined)
    return { enabled: false, reason: 'no_endpoint' };

  if (exporter !== undefined && exporter !== 'otlp')
    problems.push(`OTEL_TRACES_EXPORTER=${exporter} is not supported (otlp or none)`);
  const protocol = otlpProtocol(env, problems);
  const endpoint = signalEndpoint ?? `${(baseEndpoint ?? DEFAULT_OTLP_ENDPOINT).replace(/\/+$/, '')}/v1/traces`;
  const endpointVar =
    signalEndpoint !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  if (!isHttpUrl(endpoint)) problems.push(`${endpointVar} must be an http:// or https:// URL, not '${endpoint}'`);
  const sampler = tracesSampler(env, problems);
  if (problems.length > 0) throw new TracingConfigError(problems);
  return { enabled: true, protocol, endpoint, sampler };
}

function otlpProtocol(env: Env, problems: string[]): OtlpProtocol {
  const name =
    value(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') !== undefined
      ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
      : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = value(env, name) ?? 'http/protobuf';
  if (protocol === 'http/protobuf' || protocol === 'http/json') return protocol;
  problems.push(
    protocol === 'grpc'
      ? `${name}=grpc is not supported: no gRPC exporter is installed; use http/protobuf or http/json (a collector's OTLP/HTTP port, 4318 by default)`
      : `${name} must be http/protobuf or http/json, not '${protocol}'`,
  );
  return 'http/protobuf';
}

function tracesSampler(env: Env, problems: string[]): TracesSampler {
  const sampler = value(env, 'OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on';
  if (!(TRACES_SAMPLERS as readonly string[]).includes(sampler)) {
    problems.push(`OTEL_TRACES_SAMPLER must be one of ${TRACES_SAMPLERS.join(', ')}, not '${sampler}'`);
    return 'parentbased_always_on';
  }
  const arg = value(env, 'OTEL_TRACES_SAMPLER_ARG');
  if (sampler.endsWith('traceidratio') && arg !== undefined) {
    const ratio = Number(arg);
    if (!(ratio >= 0 && ratio <= 1)) problems.push(`OTEL_TRACES_SAMPLER_ARG must be a ratio in [0, 1], not '${arg}'`);
  }
  return sampler as TracesSampler;
}

function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}
