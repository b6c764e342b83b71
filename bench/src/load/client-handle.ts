import { fork, type ChildProcess } from 'node:child_process';
import type { ClientCommand, ClientReply } from './stream-client.js';

/** Parent side of one stream-client child process: one command at a time, one reply each. */
export class ClientHandle {
  readonly child: ChildProcess;
  #waiting: ((r: ClientReply) => void) | undefined;
  #exited: Promise<void>;

  constructor(script: string) {
    this.child = fork(script, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] });
    this.child.on('message', (m: unknown) => {
      const w = this.#waiting;
      this.#waiting = undefined;
      w?.(m as ClientReply);
    });
    this.#exited = new Promise((resolve) => this.child.once('exit', () => resolve()));
  }

  send(cmd: ClientCommand): Promise<ClientReply> {
    if (this.#waiting !== undefined) throw new Error('stream client: one command at a time');
    return new Promise((resolve, reject) => {
      this.#waiting = resolve;
      this.child.send(cmd, (err) => {
        if (err !== null) reject(err);
      });
    });
  }

  async close(): Promise<void> {
    if (this.child.exitCode === null && this.child.connected) {
      await this.send({ type: 'close' }).catch(() => undefined);
    }
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await this.#exited;
    clearTimeout(timer);
  }
}
