// API keys: the organization's (GET /keys), a new one shown once (POST /keys), revocation at once
// (DELETE /keys/{id}). Revoking the key this tab uses ends the tab's session.
import { useState } from 'preact/hooks';
import { html } from '../html.js';
import { api, get, unclaimed } from '../api.js';
import { Badge, ConfirmButton, ErrorBox, Field, Loading, PageHead, TextInput, shortWhen, useLoad } from '../ui.js';

export function KeysPage({ onOwnKeyRevoked }) {
  const { loading, data, error, reload } = useLoad(() => get('/keys'), []);
  const [name, setName] = useState('');
  const [made, setMade] = useState(null);
  const [formError, setFormError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [copied, setCopied] = useState(false);
  const keys = data?.keys ?? [];
  const active = keys.filter((k) => !k.revoked_at);

  const create = async (e) => {
    e.preventDefault();
    setBusy(true);
    try {
      const { key } = await api('POST', '/keys', name.trim() ? { name: name.trim() } : {});
      setMade(key);
      setCopied(false);
      setName('');
      setFormError(null);
      void reload();
    } catch (err) {
      setFormError(err);
    } finally {
      setBusy(false);
    }
  };
  const revoke = async (k) => {
    try {
      await api('DELETE', `/keys/${k.id}`);
      setFormError(null);
      if (made?.id === k.id) setMade(null);
      if (k.current) return onOwnKeyRevoked();
      void reload();
    } catch (err) {
      setFormError(err);
    }
    return undefined;
  };
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(made.secret);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };

  return html`<div class="page">
    <${PageHead} title="API keys" sub="Keys of your organization. Each works for the whole API; only its hash is kept." />
    <form class="panel inline-form" id="new-key" novalidate onSubmit=${create}>
      <h2>Make a key</h2>
      <${Field} label="What it is for" path="name" error=${formError} hint="optional, e.g. CRM integration">
        ${({ id, describedBy }) => html`<${TextInput} id=${id} name="key-name" aria-describedby=${describedBy} value=${name} onInput=${setName} maxlength="200" />`}
      <//>
      <div class="buttons"><button type="submit" id="create-key" disabled=${busy}>Make key</button></div>
    </form>
    ${made
      ? html`<div class="panel new-key" id="made-key" role="status">
          <h2>Your new key ${made.name ? html`<span class="hint">${made.name}</span>` : null}</h2>
          <p><b>Copy it now: it is shown this once.</b> Only its hash is stored; nobody can show it again.</p>
          <p class="secret"><code id="new-key-secret">${made.secret}</code> <button type="button" class="quiet small" onClick=${copy}>${copied ? 'Copied' : 'Copy'}</button></p>
          <button type="button" class="quiet small" onClick=${() => setMade(null)}>I have kept it</button>
        </div>`
      : null}
    <${ErrorBox} error=${formError} details=${unclaimed(formError, ['name'])} />
    ${error ? html`<${ErrorBox} error=${error} />` : null}
    ${loading && !data ? html`<${Loading} />` : null}
    ${data
      ? html`<div class="table-wrap"><table class="list" id="key-list">
          <thead><tr><th>Name</th><th>Key</th><th>Made</th><th>State</th><th></th></tr></thead>
          <tbody>${keys.map(
            (k) => html`<tr data-key=${k.id} class=${k.revoked_at ? 'revoked' : ''}>
              <td>${k.name ?? html`<span class="hint">(no name)</span>`} ${k.current ? html`<${Badge} kind="current">this tab's key<//>` : null}</td>
              <td><code>${k.prefix}…</code></td>
              <td>${shortWhen(k.created_at)}</td>
              <td>${k.revoked_at ? html`revoked ${shortWhen(k.revoked_at)}` : 'active'}</td>
              <td class="row-actions">${k.revoked_at
                ? null
                : html`<${ConfirmButton}
                    class="danger small"
                    disabled=${active.length === 1}
                    title=${active.length === 1 ? 'The last active key cannot be revoked: make another first' : undefined}
                    onConfirm=${() => revoke(k)}
                    confirmLabel=${k.current ? 'Revoke this tab\u2019s key?' : 'Revoke?'}
                  >Revoke<//>`}</td>
            </tr>`,
          )}</tbody>
        </table></div>
        ${active.length === 1 ? html`<p class="hint">The organization's last active key cannot be revoked: make another first.</p>` : null}`
      : null}
  </div>`;
}
