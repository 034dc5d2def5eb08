// Account: the organization's webhook, its Twilio account, its SIP trunk and its outbound limits
// (PATCH /account, a section at a time). Secrets are shown masked and never sent back as shown.
import { useEffect, useState } from 'preact/hooks';
import { html } from '../html.js';
import { api, get, unclaimed } from '../api.js';
import { Checkbox, ErrorBox, Field, Loading, NumberInput, PageHead, TextArea, TextInput, useLoad } from '../ui.js';

const EVENTS = ['assistant-request', 'tool-calls', 'status-update', 'end-of-call-report'];

/** One section: its own form, its own Save, the API's problems beside its fields. */
function Section({ id, title, intro, paths, build, onSaved, children, removable }) {
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState(null);
  const [busy, setBusy] = useState(false);
  const send = async (body) => {
    setBusy(true);
    try {
      const { account } = await api('PATCH', '/account', body);
      setError(null);
      setNotice(`Saved at ${new Date().toLocaleTimeString()}.`);
      onSaved(account);
    } catch (err) {
      setError(err);
      setNotice(null);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="panel" id=${id} novalidate onSubmit=${(e) => (e.preventDefault(), send(build()))}>
    <h2>${title}</h2>
    ${intro ? html`<p class="hint">${intro}</p>` : null}
    <div class="grid">${children(error)}</div>
    <${ErrorBox} error=${error} details=${unclaimed(error, paths)} />
    ${notice ? html`<p class="status" role="status">${notice}</p>` : null}
    <div class="buttons">
      <button type="submit" disabled=${busy}>Save</button>
      ${removable ? html`<button type="button" class="quiet" disabled=${busy} onClick=${() => send(removable)}>Remove</button>` : null}
    </div>
  </form>`;
}

export function AccountPage() {
  const { loading, data, error, set } = useLoad(() => get('/account'), []);
  const account = data?.account;
  const [w, setW] = useState({});
  const [t, setT] = useState({});
  const [s, setS] = useState({});
  const [o, setO] = useState({});
  useEffect(() => {
    if (!account) return;
    setW({ url: account.webhook?.url ?? '', secret: '', events: account.webhook?.events ?? [] });
    setT({ account_sid: account.telephony.twilio?.account_sid ?? '', auth_token: '' });
    setS({
      allowed: (account.sip.inbound?.allowed_addresses ?? []).join('\n'),
      in_user: account.sip.inbound?.username ?? '',
      in_password: '',
      proxy: account.sip.outbound?.proxy ?? '',
      out_user: account.sip.outbound?.username ?? '',
      out_password: '',
      caller_id: account.sip.outbound?.caller_id ?? '',
    });
    setO({ ...account.outbound });
  }, [account]);
  const saved = (a) => set({ account: a });

  if (loading && !data) return html`<div class="page"><${PageHead} title="Account" /><${Loading} /></div>`;
  if (error) return html`<div class="page"><${PageHead} title="Account" /><${ErrorBox} error=${error} /></div>`;
  const on = (setter, k) => (v) => setter((x) => ({ ...x, [k]: v }));
  return html`<div class="page account-page">
    <${PageHead} title="Account" sub=${html`Organization <b>${account.name}</b> · <code>${account.id}</code>`} />
    <${Section}
      id="account-webhook"
      title="Webhook"
      intro="Where the organization's calls send their events, unless a number or an assistant has its own."
      paths=${['webhook']}
      onSaved=${saved}
      removable=${account.webhook ? { webhook: null } : null}
      build=${() => ({ webhook: { url: w.url.trim(), ...(w.secret ? { secret: w.secret } : {}), ...(w.events.length ? { events: w.events } : {}) } })}
    >${(err) => html`
      <${Field} label="URL" path="webhook.url" error=${err} wide>${({ id, describedBy }) => html`<${TextInput} id=${id} name="webhook.url" aria-describedby=${describedBy} value=${w.url} onInput=${on(setW, 'url')} placeholder="https://hooks.example.com/switchboard" />`}<//>
      <${Field} label="Secret" path="webhook.secret" error=${err} hint=${account.webhook?.secret ? `now ${account.webhook.secret}; empty keeps it` : 'empty: one is generated'}>${({ id }) => html`<${TextInput} id=${id} name="webhook.secret" type="password" autocomplete="new-password" value=${w.secret} onInput=${on(setW, 'secret')} />`}<//>
      <${Field} label="Events" path="webhook.events" error=${err} hint="none chosen: all four">${() => html`<div class="checks">${EVENTS.map((ev) => html`<${Checkbox} label=${ev} checked=${w.events?.includes(ev)} onChange=${(c) => setW((x) => ({ ...x, events: c ? [...x.events, ev] : x.events.filter((y) => y !== ev) }))} />`)}</div>`}<//>
    `}<//>
    <${Section}
      id="account-twilio"
      title="Twilio"
      intro="The Twilio account whose numbers call in (voice webhook: /twilio/voice) and through which outbound calls are placed."
      paths=${['telephony']}
      onSaved=${saved}
      removable=${account.telephony.twilio ? { telephony: { twilio: null } } : null}
      build=${() => ({ telephony: { twilio: { account_sid: t.account_sid.trim(), auth_token: t.auth_token } } })}
    >${(err) => html`
      <${Field} label="Account SID" path="telephony.twilio.account_sid" error=${err}>${({ id, describedBy }) => html`<${TextInput} id=${id} name="account_sid" aria-describedby=${describedBy} value=${t.account_sid} onInput=${on(setT, 'account_sid')} placeholder="AC…" />`}<//>
      <${Field} label="Auth token" path="telephony.twilio.auth_token" error=${err} hint=${account.telephony.twilio ? `now ${account.telephony.twilio.auth_token}; type it again to save` : ''}>${({ id, describedBy }) => html`<${TextInput} id=${id} name="auth_token" type="password" autocomplete="new-password" aria-describedby=${describedBy} value=${t.auth_token} onInput=${on(setT, 'auth_token')} />`}<//>
    `}<//>
    <${Section}
      id="account-sip"
      title="SIP trunk"
      intro="Calls over a SIP trunk (numbers with carrier SIP): where INVITEs may come from, and the proxy outbound calls and transfers go through. Passwords are never shown; empty keeps the one set."
      paths=${['sip']}
      onSaved=${saved}
      removable=${account.sip.inbound || account.sip.outbound ? { sip: null } : null}
      build=${() => {
        const allowed = s.allowed.split(/[\s,]+/).filter(Boolean);
        const inbound = allowed.length || s.in_user ? { allowed_addresses: allowed, ...(s.in_user ? { username: s.in_user } : {}), ...(s.in_password ? { password: s.in_password } : {}) } : null;
        const outbound = s.proxy ? { proxy: s.proxy.trim(), ...(s.out_user ? { username: s.out_user } : {}), ...(s.out_password ? { password: s.out_password } : {}), ...(s.caller_id ? { caller_id: s.caller_id.trim() } : {}) } : null;
        return { sip: { inbound, outbound } };
      }}
    >${(err) => html`
      <${Field} label="Inbound: allowed addresses" path="sip.inbound.allowed_addresses" error=${err} hint="one address or CIDR range per line" wide>${({ id, describedBy }) => html`<${TextArea} id=${id} name="allowed_addresses" rows="3" aria-describedby=${describedBy} value=${s.allowed} onInput=${on(setS, 'allowed')} placeholder="192.76.120.10" />`}<//>
      <${Field} label="Inbound: username" path="sip.inbound.username" error=${err}>${({ id }) => html`<${TextInput} id=${id} name="in_user" value=${s.in_user} onInput=${on(setS, 'in_user')} />`}<//>
      <${Field} label="Inbound: password" path="sip.inbound.password" error=${err} hint=${account.sip.inbound?.password_set ? 'set' : 'not set'}>${({ id }) => html`<${TextInput} id=${id} name="in_password" type="password" autocomplete="new-password" value=${s.in_password} onInput=${on(setS, 'in_password')} />`}<//>
      <${Field} label="Outbound: proxy" path="sip.outbound.proxy" error=${err} hint="sip:host[:port][;transport=udp|tcp]">${({ id, describedBy }) => html`<${TextInput} id=${id} name="proxy" aria-describedby=${describedBy} value=${s.proxy} onInput=${on(setS, 'proxy')} placeholder="sip:sip.telnyx.com" />`}<//>
      <${Field} label="Outbound: username" path="sip.outbound.username" error=${err}>${({ id }) => html`<${TextInput} id=${id} name="out_user" value=${s.out_user} onInput=${on(setS, 'out_user')} />`}<//>
      <${Field} label="Outbound: password" path="sip.outbound.password" error=${err} hint=${account.sip.outbound?.password_set ? 'set' : 'not set'}>${({ id }) => html`<${TextInput} id=${id} name="out_password" type="password" autocomplete="new-password" value=${s.out_password} onInput=${on(setS, 'out_password')} />`}<//>
      <${Field} label="Outbound: caller id" path="sip.outbound.caller_id" error=${err}>${({ id }) => html`<${TextInput} id=${id} name="caller_id" value=${s.caller_id} onInput=${on(setS, 'caller_id')} placeholder="+15550100200" />`}<//>
    `}<//>
    <${Section}
      id="account-outbound"
      title="Outbound limits"
      intro="Dialling never goes faster or wider than this."
      paths=${['outbound']}
      onSaved=${saved}
      build=${() => ({ outbound: { max_concurrent_calls: o.max_concurrent_calls, calls_per_second: o.calls_per_second } })}
    >${(err) => html`
      <${Field} label="Live outbound calls at most" path="outbound.max_concurrent_calls" error=${err}>${({ id, describedBy }) => html`<${NumberInput} id=${id} name="max_concurrent_calls" aria-describedby=${describedBy} value=${o.max_concurrent_calls} onInput=${on(setO, 'max_concurrent_calls')} min="1" max="1000" />`}<//>
      <${Field} label="Calls dialled per second" path="outbound.calls_per_second" error=${err}>${({ id, describedBy }) => html`<${NumberInput} id=${id} name="calls_per_second" aria-describedby=${describedBy} value=${o.calls_per_second} onInput=${on(setO, 'calls_per_second')} min="0.01" max="100" step="0.1" />`}<//>
    `}<//>
  </div>`;
}
