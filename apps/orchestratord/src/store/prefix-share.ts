/**
 * What replicas tell each other about the prefix index (.specs/68-prefix-routing.md): a pool was
 * given a prompt (it holds these blocks now), or a replica learnt a pool's cache capacity from an
 * answer. A hint, as the cluster signals are: a lost message only makes another replica's index
 * stale until it places or hears that prompt again; nothing waits for one.
 */
export type PrefixNews =
  | {
      readonly kind: 'held';
      /** The replica that placed the prompt (a replica skips its own news). */
      readonly from: string;
      /** `node_id/pool_id`. */
      readonly pool: string;
      /** The prompt's chained block hashes (prefix/prompt-blocks.ts), first block first. */
      readonly hashes: readonly string[];
    }
  | { readonly kind: 'capacity'; readonly from: string; readonly pool: string; readonly blocks: number };

export type PrefixNewsListener = (news: PrefixNews) => void;

export interface PrefixShare {
  /** Sends to every subscriber of every replica (the sender's own included); never throws. */
  publish(news: PrefixNews): void;
  /** Returns the unsubscribe function. */
  subscribe(listener: PrefixNewsListener): () => void;
}

/** `held\t<from>\t<pool>\t<h1,h2,…>` or `capacity\t<from>\t<pool>\t<blocks>`. */
export function formatPrefixNews(news: PrefixNews): string {
  return news.kind === 'held'
    ? `held\t${news.from}\t${news.pool}\t${news.hashes.join(',')}`
    : `capacity\t${news.from}\t${news.pool}\t${news.blocks}`;
}

export function parsePrefixNews(message: string): PrefixNews | undefined {
  const [kind, from, pool, rest, extra] = message.split('\t');
  if (
    from === undefined ||
    from === '' ||
    pool === undefined ||
    pool === '' ||
    rest === undefined ||
    extra !== undefined
  )
    return undefined;
  if (kind === 'held') {
    const hashes = rest.split(',');
    if (hashes.some((h) => h === '')) return undefined;
    return { kind, from, pool, hashes };
  }
  if (kind === 'capacity' && /^\d{1,9}$/.test(rest) && Number(rest) > 0)
    return { kind, from, pool, blocks: Number(rest) };
  return undefined;
}

/** One process's share: delivers to its own subscribers, after the publishing call returns (as Redis does). */
export class LocalPrefixShare implements PrefixShare {
  readonly #listeners = new Set<PrefixNewsListener>();

  publish(news: PrefixNews): void {
    if (this.#listeners.size === 0) return;
    queueMicrotask(() => {
      for (const l of this.#listeners) l(news);
    });
  }

  subscribe(listener: PrefixNewsListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
