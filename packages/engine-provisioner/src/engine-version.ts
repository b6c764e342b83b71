/**
 * Parses `llama-server --version` (printed on **stderr**, after one log line):
 * `version: 0.5.0-dev (build 1, commit de3ff81)` / `built with GNU 12.2.0 for Linux x86_64`.
 */
export function parseVersionOutput(output: string): { engineVersion: string; versionOutput: string } | undefined {
  const lines = output.split('\n').map((l) => l.trimEnd());
  const idx = lines.findIndex((l) => /^version:\s*\S/.test(l));
  if (idx < 0) return undefined;
  const engineVersion = (lines[idx] ?? '').replace(/^version:\s*/, '').trim();
  const versionOutput = lines.slice(idx).filter(Boolean).join('\n');
  return { engineVersion, versionOutput };
}
