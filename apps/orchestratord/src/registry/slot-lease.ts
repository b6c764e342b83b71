import type { Lease } from './pool-view.js';

/**
 * One slot of a pool, held for a dispatch. A lease lasts as long as its task's stream, so it is one
 * small object calling the registry's shared give-back, not a closure with its own context per
 * lease (performance notes: slot lease as one object).
 */
export class SlotLease implements Lease {
  #giveBack: ((nodeId: string, poolId: string) => void) | undefined;

  constructor(
    readonly nodeId: string,
    readonly poolId: string,
    giveBack: (nodeId: string, poolId: string) => void,
  ) {
    this.#giveBack = giveBack;
  }

  release(): void {
    const giveBack = this.#giveBack;
    if (giveBack === undefined) return;
    this.#giveBack = undefined;
    giveBack(this.nodeId, this.poolId);
  }
}
