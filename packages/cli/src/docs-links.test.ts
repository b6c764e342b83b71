// The user-facing Markdown (README.md, ARCHITECTURE.md, docs/*.md): every relative link points at a
// file or folder that exists, and every `#anchor` into a Markdown file names one of its headings
// (GitHub's slugs). Links to http(s) and mailto are not followed. The README stays a page for users:
// at most 300 lines of at most 200 characters (the long form is in docs/).
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const MAX_README_LINE = 200;
const MAX_README_LINES = 300;

/** The pages checked, relative to the repository root. */
function markdownPages(): string[] {
  const docs = readdirSync(join(REPO, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', 'ARCHITECTURE.md', ...docs];
}

/** Each line of `text` with fenced code blocks blanked (links and headings there are not Markdown). */
function proseLines(text: string): string[] {
  let fence: string | undefined;
  return text.split('\n').map((line) => {
    const opener = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === undefined) {
      if (opener !== undefined) {
        fence = opener;
        return '';
      }
      return line;
    }
    if (opener !== undefined && opener[0] === fence[0] && opener.length >= fence.length) fence = undefined;
    return '';
  });
}

/** `line` with the text of each inline code span replaced, so `[a](b)` inside code is no link. */
function withoutCodeSpans(line: string): string {
  return line.replace(/(`+)(?:(?!\1)[\s\S])+?\1/g, 'code');
}

interface Link {
  readonly line: number;
  readonly target: string;
}

/** Inline links and images `[text](target "title")`, and reference definitions `[ref]: target`. */
function linksOf(text: string): Link[] {
  const links: Link[] = [];
  proseLines(text).forEach((raw, i) => {
    const line = withoutCodeSpans(raw);
    for (const m of line.matchAll(/\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g)) {
      links.push({ line: i + 1, target: m[1]!.replace(/^<|>$/g, '') });
    }
    const definition = /^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)/.exec(line);
    if (definition !== null) links.push({ line: i + 1, target: definition[1]!.replace(/^<|>$/g, '') });
  });
  return links;
}

/** GitHub's anchor for a heading's text: lower case, punctuation dropped, each space a hyphen. */
function githubSlug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link shows its text
    .replace(/<[^>]+>/g, '') // inline HTML
    .replace(/[`*]/g, '') // code and emphasis marks
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** Every anchor a Markdown file's headings give, with GitHub's -1, -2 … for repeated headings. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(text)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = githubSlug(heading);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Why `target` (linked from the page `page`) is broken, or undefined when it is fine. */
function problemOf(page: string, target: string): string | undefined {
  if (/^(?:https?:|mailto:)/i.test(target)) return undefined;
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return 'not a relative link (only http(s) and mailto are skipped)';
  const hash = target.indexOf('#');
  const pathPart = hash === -1 ? target : target.slice(0, hash);
  const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
  let file: string;
  try {
    file = pathPart === '' ? join(REPO, page) : resolve(REPO, dirname(page), decodeURIComponent(pathPart));
  } catch {
    return 'cannot decode the path';
  }
  if (relative(REPO, file).startsWith('..')) return 'points outside the repository';
  if (!existsSync(file)) return `no such file: ${relative(REPO, file)}`;
  if (anchor === undefined || anchor === '') return undefined;
  if (!file.endsWith('.md') || !statSync(file).isFile()) return undefined;
  const anchors = anchorsOf(readFileSync(file, 'utf8'));
  if (anchors.has(anchor)) return undefined;
  return `no heading with the anchor #${anchor} in ${relative(REPO, file)}`;
}

describe('documentation links', () => {
  it('finds the pages', () => {
    const pages = markdownPages();
    expect(pages).toContain('docs/README.md');
    for (const page of pages) expect(existsSync(join(REPO, page)), page).toBe(true);
  });

  it('every relative link points at a file, and every #anchor at a heading', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const page of markdownPages()) {
      for (const link of linksOf(readFileSync(join(REPO, page), 'utf8'))) {
        checked += 1;
        const problem = problemOf(page, link.target);
        if (problem !== undefined) broken.push(`${page}:${link.line}: (${link.target}) — ${problem}`);
      }
    }
    expect(checked).toBeGreaterThan(20);
    expect(broken, `${broken.length} broken link(s):\n${broken.join('\n')}`).toEqual([]);
  });

  it(`the README is a page for users: at most ${MAX_README_LINES} lines, each at most ${MAX_README_LINE} characters`, () => {
    const lines = readFileSync(join(REPO, 'README.md'), 'utf8').split('\n');
    expect(lines.length).toBeLessThanOrEqual(MAX_README_LINES);
    const long = lines.flatMap((line, i) =>
      [...line].length > MAX_README_LINE
        ? [`README.md:${i + 1}: ${[...line].length} characters: ${line.slice(0, 60)}…`]
        : [],
    );
    expect(long, `README lines over ${MAX_README_LINE} characters:\n${long.join('\n')}`).toEqual([]);
  });
});

describe('githubSlug', () => {
  it('follows GitHub: lower case, punctuation dropped, spaces to hyphens', () => {
    expect(githubSlug('Several orchestratord replicas (`llorch up --replicas 3`)')).toBe(
      'several-orchestratord-replicas-llorch-up---replicas-3',
    );
    expect(githubSlug('Credentials: node token vs client keys (orchestratord)')).toBe(
      'credentials-node-token-vs-client-keys-orchestratord',
    );
    expect(githubSlug('`/v2` tasks over plain HTTP (Server-Sent Events)')).toBe(
      'v2-tasks-over-plain-http-server-sent-events',
    );
    expect(githubSlug('1. Install the code')).toBe('1-install-the-code');
    expect(githubSlug('snake_case and [a link](x.md)')).toBe('snake_case-and-a-link');
  });
});
