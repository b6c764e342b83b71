import { readFileSync } from 'node:fs';
import { PoolManagerConfigSchema } from '@llama-orch/contracts';
import { parse } from 'yaml';

/**
 * The catalog file of the orchestratord that `llorch up` starts (`ORCHD_CATALOG_FILE`): `catalogFile`
 * (the dev cluster's default catalog, requirements/catalog.yaml) when pool-managerd's config loads
 * models on request (`on_demand`), so that no model is listed that no node can load. Nothing when the
 * caller's environment sets ORCHD_CATALOG_FILE (empty: no catalog file), or when the config cannot be
 * read (pool-managerd itself reports it).
 */
export function catalogFileEnv(
  catalogFile: string | undefined,
  configPath: string,
  env: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  if (catalogFile === undefined || env.ORCHD_CATALOG_FILE !== undefined) return {};
  try {
    const parsed = PoolManagerConfigSchema.safeParse(parse(readFileSync(configPath, 'utf8')));
    return parsed.success && parsed.data.on_demand !== undefined ? { ORCHD_CATALOG_FILE: catalogFile } : {};
  } catch {
    return {};
  }
}
