import { useState } from 'preact/hooks';

/**
 * Shown when orchestratord answered 401 (or 403 to the dashboard: its data routes take only an
 * operator key when keys are configured): the key is kept in
 * sessionStorage for this tab and sent as `Authorization: Bearer` on every call.
 */
export function KeyForm({
  reason,
  hadKey,
  onSubmit,
}: {
  reason: string | undefined;
  hadKey: boolean;
  onSubmit(key: string): void;
}) {
  const [key, setKey] = useState('');
  return (
    <section class="card key-form" aria-labelledby="key-heading">
      <h2 id="key-heading">API key needed</h2>
      <p>
        {hadKey ? 'orchestratord refused the key this tab holds' : 'orchestratord asks for an API key'}
        {reason ? ` (${reason})` : ''}. The dashboard shows every tenant's tasks, so it takes an operator key; the
        playground sends the same key to /v1. It stays in this tab's session storage only.
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const k = key.trim();
          if (k) onSubmit(k);
        }}
      >
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autocomplete="off"
          required
          autoFocus
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
        />
        <button type="submit">Use key</button>
      </form>
    </section>
  );
}
