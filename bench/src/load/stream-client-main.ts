#!/usr/bin/env node
import { StreamClient, type ClientCommand, type ClientReply } from './stream-client.js';

/** Child-process entry of the stream load client; commands and replies travel over the IPC channel. */
const client = new StreamClient();
const reply = (r: ClientReply): void => {
  process.send?.(r);
};

process.on('message', (raw: unknown) => {
  const cmd = raw as ClientCommand;
  switch (cmd.type) {
    case 'open':
      void client.open(cmd).then(reply);
      break;
    case 'measure': {
      const r = client.measure(cmd.on);
      if (r !== undefined) reply(r);
      else reply({ type: 'status', alive: 0, withTokens: 0, ended: 0, errored: 0, tokens: 0 });
      break;
    }
    case 'status':
      reply(client.status());
      break;
    case 'close':
      void client.close().then(() => {
        reply({ type: 'closed' });
        process.disconnect();
      });
      break;
  }
});
process.on('disconnect', () => {
  void client.close().then(() => process.exit(0));
});
