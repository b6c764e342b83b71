import type { ChatMessage, EngineCall, PlacementOverrides, PoolCapability, Sampling } from '@llama-orch/contracts';
import type { PrefixPrediction } from '../prefix/prefix-routing.js';
import { promptBlocks, type PromptBlocks } from '../prefix/prompt-blocks.js';
import { candidateKey } from '../registry/pool-view.js';
import type { PlacementRequest, PoolRef } from './placement.js';

/** The task fields placement reads. */
export interface PlacementFields {
  readonly model_ref: string;
  /** With `call`, the kind of pool the task needs; absent = any pool of the model. */
  readonly workload?: 'chat' | 'completion' | undefined;
  readonly call?: EngineCall | undefined;
  readonly ctx: number;
  readonly determinism?: 'strict' | 'best_effort' | undefined;
  readonly placement?: PlacementOverrides | undefined;
  /** The prompt (cache-aware placement matches its blocks). */
  readonly prompt?: string | undefined;
  readonly messages?: readonly ChatMessage[] | undefined;
  readonly sampling?: Pick<Sampling, 'tools'> | undefined;
}

/**
 * What the scheduler keeps per task: the task's placement constraints (made once at admission and
 * handed to `place()` as they are), the pools that already failed it, and its wait key.
 */
export class PlacementTicket implements PlacementRequest {
  readonly model_ref: string;
  readonly kind: PoolCapability | undefined;
  readonly ctx: number;
  readonly determinism: 'strict' | 'best_effort' | undefined;
  readonly placement: PlacementOverrides | undefined;
  /** The pool that served the task's session last (prompt-cache affinity); read once at admission. */
  readonly affinity: PoolRef | undefined;
  /** Created by the first `avoid`: most tasks never fail, and an empty Set per task costs ~150 B while it runs. */
  #exclude: Set<string> | undefined;
  /** Whether the task has waited for capacity at least once. */
  waited = false;
  /** What the prefix index expected of the pool the task was placed on (cache-aware placement). */
  prefix: PrefixPrediction | undefined;
  #key: string | undefined;
  readonly #fields: PlacementFields;
  /** Hashed on first use: only cache-aware placement reads them. */
  #blocks: PromptBlocks | null | undefined;

  constructor(fields: PlacementFields, affinity?: PoolRef) {
    this.#fields = fields;
    this.affinity = affinity;
    this.model_ref = fields.model_ref;
    this.kind = fields.call?.kind ?? fields.workload;
    this.ctx = fields.ctx;
    this.determinism = fields.determinism;
    this.placement = fields.placement;
  }

  /** The prompt's chained block hashes (prefix/prompt-blocks.ts); undefined for a task without a prompt. */
  get blocks(): PromptBlocks | undefined {
    if (this.#blocks === undefined) {
      const f = this.#fields;
      this.#blocks =
        promptBlocks({
          workload: f.workload ?? 'completion',
          prompt: f.prompt,
          messages: f.messages,
          sampling: f.sampling,
          call: f.call,
        }) ?? null;
    }
    return this.#blocks ?? undefined;
  }

  /** `node_id/pool_id` of pools that failed this task; placement avoids them while it can. */
  get exclude(): ReadonlySet<string> | undefined {
    return this.#exclude;
  }

  /**
   * Tasks with equal keys get equal placement decisions, so when one must wait all of them wait.
   * Affinity is not part of the key: it only picks among free pools, never makes a task wait.
   * Computed once and kept until `avoid` changes the exclusions: the pump asks for the key of
   * every queued task on every pass.
   */
  get waitKey(): string {
    this.#key ??= JSON.stringify([
      this.model_ref,
      this.kind,
      this.ctx,
      this.determinism ?? '',
      this.placement ?? null,
      [...(this.#exclude ?? [])].sort(),
    ]);
    return this.#key;
  }

  /** The pool failed this task: place it elsewhere while another pool is eligible. */
  avoid(pool: { node_id: string; pool_id: string }): void {
    (this.#exclude ??= new Set()).add(candidateKey(pool));
    this.#key = undefined;
  }
}
