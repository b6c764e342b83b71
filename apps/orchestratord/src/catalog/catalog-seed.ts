import { readFileSync } from 'node:fs';
import { CatalogRegisterRequestSchema, formatIssues } from '@llama-orch/contracts';
import type { Log } from '@llama-orch/daemon-support';
import { parseDocument } from 'yaml';
import { ConfigError } from '../errors.js';
import type { CatalogRegistration, CatalogStore } from '../store/catalog-store.js';

/**
 * The catalog file (`ORCHD_CATALOG_FILE`, .specs/67-models-on-demand.md "The default catalog"):
 * models registered when orchestratord starts, each as `POST /v2/catalog/models` would take it.
 *
 * ```yaml
 * models:
 *   - ref: synthetic:llama?role=embed
 *     aliases: [embedder]
 *     serve: embeddings
 * ```
 */
export interface CatalogFile {
  readonly path: string;
  /** In file order; names (refs and aliases) unique across them. */
  readonly registrations: readonly CatalogRegistration[];
}

const ENV = 'ORCHD_CATALOG_FILE';

/**
 * Reads and validates the catalog file once, before anything starts. Every problem — unreadable,
 * not YAML, not `{models: [...]}`, an entry `CatalogRegisterRequest` refuses, a name two entries
 * claim — is reported in one {@link ConfigError} (`CONFIG_INVALID`) naming the file and the entry
 * (`models[i]` and its ref).
 */
export function readCatalogFile(
  path: string,
  readFile: (path: string) => string = (p) => readFileSync(p, 'utf8'),
): CatalogFile {
  const at = `${ENV}: ${path}`;
  let text: string;
  try {
    text = readFile(path);
  } catch (err) {
    throw new ConfigError([`${at}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`]);
  }
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0)
    throw new ConfigError(doc.errors.map((e) => `${at}: not valid YAML: ${e.message.split('\n')[0] ?? ''}`));
  const data: unknown = doc.toJS();
  if (
    typeof data !== 'object' ||
    data === null ||
    Array.isArray(data) ||
    !Array.isArray((data as { models?: unknown }).models)
  )
    throw new ConfigError([`${at}: expected a mapping with a list under 'models:'`]);
  const extra = Object.keys(data).filter((k) => k !== 'models');
  const problems = extra.map((k) => `${at}: unknown key '${k}' (only 'models:' is read)`);
  const registrations: CatalogRegistration[] = [];
  /** name → the entry (`models[i]`) that gives it first */
  const owners = new Map<string, string>();
  (data as { models: unknown[] }).models.forEach((raw, i) => {
    const ref = (raw as { ref?: unknown } | null)?.ref;
    const entry = `models[${i}]${typeof ref === 'string' ? ` (ref '${ref}')` : ''}`;
    const parsed = CatalogRegisterRequestSchema.safeParse(raw);
    if (!parsed.success) {
      for (const line of formatIssues(parsed.error).split('\n')) problems.push(`${at}: ${entry}: ${line}`);
      return;
    }
    const { ref: id, sha256, aliases, ...policy } = parsed.data;
    for (const name of new Set([id, ...aliases])) {
      const owner = owners.get(name);
      if (owner !== undefined) problems.push(`${at}: ${entry}: '${name}' is already a name of ${owner}`);
      else owners.set(name, entry);
    }
    registrations.push({ ref: id, ...(sha256 !== undefined ? { sha256 } : {}), aliases, policy });
  });
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({ path, registrations: Object.freeze(registrations) });
}

/** What {@link seedCatalog} did with each entry of the file. */
export interface CatalogSeedReport {
  /** Registered now (absent before). */
  readonly registered: readonly string[];
  /** Already in the catalog: left as they are. */
  readonly kept: readonly string[];
  /** A name is another entry's: not registered (logged as a warning). */
  readonly conflicts: readonly string[];
}

/**
 * Registers each model of the file that the catalog lacks. An entry already there (by its ref) is
 * left as it is: what operators changed since through the API — aliases, policy — wins over the
 * file, at every start. A ref or alias that is a name of another entry is a warning, and the rest
 * goes on. Store failures reject (the caller refuses to start).
 *
 * Not one atomic step: two replicas starting together may both find a model absent, and the second
 * `put` then rewrites it with the same file's content.
 */
export async function seedCatalog(catalog: CatalogStore, file: CatalogFile, log: Log): Promise<CatalogSeedReport> {
  const registered: string[] = [];
  const kept: string[] = [];
  const conflicts: string[] = [];
  for (const reg of file.registrations) {
    const found = await catalog.get(reg.ref);
    if (found?.id === reg.ref) {
      kept.push(reg.ref);
      log.debug({ model: reg.ref, file: file.path }, 'catalog file: model already registered; left as it is');
      continue;
    }
    const put =
      found === undefined ? await catalog.put(reg) : ({ kind: 'conflict', name: reg.ref, owner: found.id } as const);
    if (put.kind === 'conflict') {
      conflicts.push(reg.ref);
      log.warn(
        {
          model: reg.ref,
          name: put.name,
          owner: put.owner,
          file: file.path,
          human: `Catalog file ${file.path}: model '${reg.ref}' not registered: '${put.name}' is already a name of catalog model '${put.owner}'`,
        },
        'catalog file: name taken',
      );
      continue;
    }
    registered.push(reg.ref);
    log.info(
      {
        model: reg.ref,
        aliases: reg.aliases,
        serve: reg.policy.serve,
        file: file.path,
        human: `Registered model '${reg.ref}'${reg.aliases.length > 0 ? ` (${reg.aliases.join(', ')})` : ''} from ${file.path}; it serves ${reg.policy.serve}, loaded on its first request`,
      },
      'catalog file: model registered',
    );
  }
  log.info(
    {
      file: file.path,
      registered: registered.length,
      kept: kept.length,
      conflicts: conflicts.length,
      human: `Catalog file ${file.path}: ${registered.length} registered, ${kept.length} already there (left as they are), ${conflicts.length} name conflicts`,
    },
    'catalog file',
  );
  return { registered, kept, conflicts };
}
