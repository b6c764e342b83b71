import type { Socket } from 'node:net';

/**
 * Commands sent in one turn of the event loop leave in one write: the connection's socket is
 * corked at the first command and uncorked in that turn's check phase (`setImmediate`), after the
 * turn's other I/O callbacks (requests that arrived together) have sent theirs. Each write to
 * redis-server costs a system call and wakes the server (on a busy machine, a context switch each
 * way); requests handled in one turn share one (.specs/80-performance.md). ioredis still answers
 * each command in order, fails it at once when the connection is down (nothing is held while the
 * socket is not writable), and times it out with its command timeout.
 */
export class WriteCoalescer {
  #corked: Socket | undefined;

  /** Called before a command is written to `socket`. */
  hold(socket: Socket | undefined): void {
    if (this.#corked !== undefined || socket === undefined || !socket.writable) return;
    socket.cork();
    this.#corked = socket;
    setImmediate(() => this.#release());
  }

  #release(): void {
    const socket = this.#corked;
    this.#corked = undefined;
    // Every cork() is matched by one uncork(), so the socket's cork count returns to 0 (a destroyed socket ignores it).
    socket?.uncork();
  }
}
