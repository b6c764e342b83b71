import { render } from 'preact';
import { ApiClient } from './lib/api.js';
import { KeyStore, type KeyStorage } from './lib/key-store.js';
import { App } from './app.js';
import './styles.css';

/** sessionStorage, or nothing where reading it throws (storage disabled): the key then lives in memory. */
function sessionStore(): KeyStorage | undefined {
  try {
    return window.sessionStorage;
  } catch {
    return undefined;
  }
}

const root = document.getElementById('app');
if (root === null) throw new Error('index.html has no #app element');
render(<App api={new ApiClient({ keys: new KeyStore(sessionStore()) })} />, root);
