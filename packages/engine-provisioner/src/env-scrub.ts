/**
 * A copy of `env` without the variables that silently change `llama-server`'s behaviour:
 * `LLAMA_ARG_*` (twins of every flag; apply when the flag is absent), `LLAMA_API_KEY`, and `AIP_*`
 * (`AIP_MODE=PREDICTION` overrides even an explicit `--port`). pool-managerd spawns engines with it.
 */
export function scrubEngineEnv(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (key.startsWith('LLAMA_ARG_') || key === 'LLAMA_API_KEY' || key.startsWith('AIP_')) continue;
    out[key] = value;
  }
  return out;
}
