import type { TaskEvent, TaskEventListener } from '../tasks/task-events.js';

/**
 * This replica's relay figures for its announcements, kept from task events (per task, never per
 * token): tasks relayed since start (ended after a dispatch to a node) and streams relayed now
 * (dispatched, not ended).
 */
export class RelayCounter {
  readonly #inFlight = new Set<string>();
  readonly #unsubscribe: () => void;
  #relayed = 0;

  constructor(tasks: { subscribe(listener: TaskEventListener): () => void }) {
    this.#unsubscribe = tasks.subscribe((e) => this.#on(e));
  }

  /** Tasks relayed since start. */
  get tasksRelayed(): number {
    return this.#relayed;
  }

  /** Streams relayed now. */
  get load(): number {
    return this.#inFlight.size;
  }

  close(): void {
    this.#unsubscribe();
    this.#inFlight.clear();
  }

  #on(e: TaskEvent): void {
    if (e.type === 'dispatched') this.#inFlight.add(e.taskId);
    else if (e.type === 'ended') {
      this.#inFlight.delete(e.task.taskId);
      if (e.task.nodeId !== undefined) this.#relayed += 1;
    }
  }
}
