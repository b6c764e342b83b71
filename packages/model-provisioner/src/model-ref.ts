import { createHash } from 'node:crypto';
import { basename, isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModelProvisionError } from './errors.js';
import { canonicalSyntheticRef, parseSyntheticParams } from './synthetic-params.js';
import type { SyntheticLlamaParams } from './synthetic-params.js';

/** The grammar, quoted in every `INVALID_MODEL_REF` message. */
export const MODEL_REF_GRAMMAR =
  'hf:<org>/<repo>/<path>.gguf | https://<host>/<path> | file:<path> | <path> (absolute, or relative to the config directory) | ' +
  'synthetic:llama[?layers=2&embd=64&heads=4&ff=128&ctx=256&seed=42&type=f32|f16]';

/**
 * A parsed model ref. `canonical` is the normalised spelling (absolute file path, explicit
 * synthetic parameters, normalised URL); `id` is derived from it, so two spellings of one model
 * share an id.
 */
export type ModelRef =
  | {
      kind: 'hf';
      id: string;
      canonical: string;
      org: string;
      repo: string;
      /** File path inside the repo. */ path: string;
    }
  | { kind: 'url'; id: string; canonical: string; url: string }
  | { kind: 'file'; id: string; canonical: string; /** Absolute path. */ path: string }
  | { kind: 'synthetic'; id: string; canonical: string; arch: 'llama'; params: SyntheticLlamaParams };

export interface ParseModelRefOptions {
  /** Accept `http://` URLs (tests on loopback). @default false */
  allowInsecureHttp?: boolean;
}

/**
 * Catalog ids: lowercase, safe as a file name and a URL path segment (no `/`, no `..` start).
 */
export const MODEL_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,127}$/;

export function isSafeModelId(id: string): boolean {
  return MODEL_ID_PATTERN.test(id) && !id.includes('..');
}

const HF_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;

function invalid(ref: string, why: string): ModelProvisionError {
  return new ModelProvisionError(
    'INVALID_MODEL_REF',
    `invalid model ref '${ref}': ${why}; expected ${MODEL_REF_GRAMMAR}`,
    { ref },
  );
}

function slug(name: string): string {
  const s = name
    .replace(/\.gguf$/i, '')
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 64);
  return s.replace(/[.-]+$/, '') || 'model';
}

/** `<readable slug>-<12 hex of sha256(canonical)>`: readable in logs, unique per canonical ref. */
function idFor(slugSource: string, canonical: string): string {
  const h = createHash('sha256').update(canonical).digest('hex').slice(0, 12);
  return `${slug(slugSource)}-${h}`;
}

function parseHf(ref: string): ModelRef {
  const rest = ref.slice('hf:'.length).replace(/^\/+/, '');
  const parts = rest.split('/');
  const [org, repo, ...fileParts] = parts;
  if (!org || !repo) throw invalid(ref, 'hf: needs <org>/<repo>/<path>.gguf');
  if (!HF_NAME.test(org) || !HF_NAME.test(repo) || org.includes('..') || repo.includes('..')) {
    throw invalid(ref, 'hf: org and repo must be [A-Za-z0-9._-]');
  }
  if (fileParts.length === 0)
    throw invalid(ref, 'hf: a whole repository is not a llama.cpp model; name one .gguf file');
  for (const seg of fileParts) {
    // each segment becomes part of a URL and never a cache path, but a traversal here is never meant
    if (seg === '' || seg === '.' || seg === '..' || /[\\?#\u0000-\u001f]/.test(seg)) {
      throw invalid(ref, `hf: bad path segment '${seg}'`);
    }
  }
  const path = fileParts.join('/');
  if (!/\.gguf$/i.test(path)) throw invalid(ref, 'hf: the file must be a .gguf');
  const canonical = `hf:${org}/${repo}/${path}`;
  return { kind: 'hf', id: idFor(basename(path), canonical), canonical, org, repo, path };
}

function parseUrl(ref: string, opts: ParseModelRefOptions): ModelRef {
  let url: URL;
  try {
    url = new URL(ref);
  } catch {
    throw invalid(ref, 'not a valid URL');
  }
  if (url.protocol === 'http:' && !opts.allowInsecureHttp) throw invalid(ref, 'http:// is refused (use https://)');
  if (!url.hostname) throw invalid(ref, 'URL without a host');
  // credentials in a ref end up in logs and catalogs; tokens go in options
  if (url.username || url.password) throw invalid(ref, 'credentials in the URL are refused');
  url.hash = '';
  const canonical = url.href;
  const name = basename(decodeURIComponent(url.pathname)) || url.hostname;
  return { kind: 'url', id: idFor(name, canonical), canonical, url: canonical };
}

function parsePath(ref: string, raw: string, baseDir: string | undefined): ModelRef {
  if (raw === '') throw invalid(ref, 'empty path');
  if (raw.includes('\u0000')) throw invalid(ref, 'NUL byte in path');
  if (raw.startsWith('~')) throw invalid(ref, '~ is not expanded; use an absolute path');
  let abs: string;
  if (isAbsolute(raw)) {
    abs = resolve(raw);
  } else {
    if (!baseDir) throw invalid(ref, "a relative path needs a base directory (the config file's directory)");
    abs = resolve(baseDir, raw);
  }
  const canonical = `file:${abs}`;
  return { kind: 'file', id: idFor(basename(abs), canonical), canonical, path: abs };
}

/**
 * Parses a model ref. Relative paths resolve against `baseDir` (the config file's directory),
 * never against the process CWD; without a `baseDir` they are refused.
 * @throws ModelProvisionError `INVALID_MODEL_REF` with the grammar in the message.
 */
export function parseModelRef(ref: string, baseDir?: string, opts: ParseModelRefOptions = {}): ModelRef {
  if (typeof ref !== 'string' || ref.trim() === '') throw invalid(String(ref), 'empty ref');
  if (ref !== ref.trim()) throw invalid(ref, 'leading or trailing whitespace');
  if (ref.length > 2048) throw invalid(ref.slice(0, 64) + '…', 'longer than 2048 characters');
  const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(ref)?.[1]?.toLowerCase();
  switch (scheme) {
    case undefined:
      return parsePath(ref, ref, baseDir);
    case 'hf':
      return parseHf(ref);
    case 'https':
    case 'http':
      return parseUrl(ref, opts);
    case 'file': {
      if (ref.startsWith('file://')) {
        let p: string;
        try {
          p = fileURLToPath(ref);
        } catch {
          throw invalid(ref, 'not a valid file:// URL');
        }
        return parsePath(ref, p, baseDir);
      }
      return parsePath(ref, ref.slice('file:'.length), baseDir);
    }
    case 'synthetic': {
      const m = /^synthetic:([a-z0-9_-]+)(?:\?(.*))?$/.exec(ref);
      if (!m || m[1] !== 'llama') throw invalid(ref, 'the only synthetic architecture is llama');
      const params = parseSyntheticParams(m[2] ?? '');
      const canonical = canonicalSyntheticRef(params);
      return { kind: 'synthetic', id: idFor('synthetic-llama', canonical), canonical, arch: 'llama', params };
    }
    default:
      throw invalid(ref, `unsupported scheme '${scheme}:'`);
  }
}

/** `ResolvedModel.source` for a parsed ref. */
export function sourceOf(ref: ModelRef): 'hf' | 'https' | 'file' | 'synthetic' {
  return ref.kind === 'url' ? 'https' : ref.kind;
}
