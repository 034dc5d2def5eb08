// One assistant, every field (DECISIONS 5): providers, models, languages, voices and clips picked
// from GET /catalog; the providers whose key this server lacks warned beside them; sandbox
// assistants labelled; the API's problems beside the fields they name. A chat or a web call with
// the assistant alone tries it.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { html } from '../html.js';
import { api, get, unclaimed } from '../api.js';
import { navigate } from '../router.js';
import { TryPanel } from '../try.js';
import { Badge, Checkbox, ConfirmButton, ErrorBox, Field, Loading, NumberInput, PageHead, Select, TextArea, TextInput, getPath, isSandboxAssistant, setPath } from '../ui.js';
import { JsonField } from './inspector.js';

const EVENTS = ['assistant-request', 'tool-calls', 'status-update', 'end-of-call-report'];
const READ_ONLY = ['id', 'created_at', 'updated_at'];

/** A new assistant starts on the sandbox providers: it runs with no keys at all (docs/sandbox.md). */
const NEW_ASSISTANT = {
  name: '',
  llm_config: { provider: 'sandbox' },
  stt_config: { provider: 'sandbox' },
  tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
};

const provider = (catalog, kinds, id) => kinds.flatMap((k) => catalog?.[k] ?? []).find((p) => p.id === id);
const realtimeIds = (catalog) => (catalog?.realtime ?? []).map((p) => p.id);

/** The sections of the form: [path, label, kind, options]. */
const SECTIONS = (catalog, fields) => {
  const llm = provider(catalog, ['llm', 'realtime'], getPath(fields, 'llm_config.provider'));
  const stt = provider(catalog, ['stt'], getPath(fields, 'stt_config.provider'));
  const tts = provider(catalog, ['tts'], getPath(fields, 'tts_config.provider'));
  const realtime = realtimeIds(catalog).includes(getPath(fields, 'llm_config.provider'));
  const sttModel = getPath(fields, 'stt_config.model') ?? stt?.default_model;
  return [
    ['Basics', [
      ['name', 'Name', 'text', { required: true }],
      ['business_name', 'Business name', 'text', { hint: 'said as {{business_name}}' }],
      ['first_message', 'First message', 'textarea', { hint: 'what the assistant says first on an inbound call (a workflow\u2019s entry node says its own first_line)' }],
      ['is_active', 'Active', 'bool', { label: 'Active: numbers answer with it' }],
    ]],
    ['Model (llm_config)', [
      ['llm_config.provider', 'Provider', 'choice', { options: [...(catalog?.llm ?? []).map((p) => [p.id, `${p.id}: ${p.description}`]), ...(catalog?.realtime ?? []).map((p) => [p.id, `${p.id} (speech to speech): ${p.description}`])] }],
      ['llm_config.model', 'Model', 'choice', { options: (llm?.models ?? []).map((m) => [m, m]), free: !llm?.models, empty: llm?.default_model ? `default (${llm.default_model})` : 'default' }],
      ...(llm?.requires_url ? [['llm_config.url', 'Server URL', 'text', { hint: 'an OpenAI-compatible chat completions server' }]] : []),
      ['llm_config.temperature', 'Temperature', 'number', { min: 0, max: 2, step: 0.1 }],
      ['llm_config.max_completion_tokens', 'Max completion tokens', 'number', { min: 1, max: 128000 }],
      ['llm_config.messages', 'Messages (the system prompt and any others)', 'json', { hint: '[{"role": "system", "content": "You are the receptionist of …"}]', rows: 5 }],
      ['llm_config.tools', 'Tools', 'json', { hint: '[{"name": "find_slot", "url": "https://…", "parameters": {"type": "object", "properties": {…}}}]', rows: 4 }],
    ]],
    ...(realtime
      ? [['Transcriber and voice', [['__realtime', 'A speech-to-speech model hears and speaks itself: no transcriber, no voice.', 'note', {}]]]]
      : [
          ['Transcriber (stt_config)', [
            ['stt_config.provider', 'Provider', 'choice', { options: (catalog?.stt ?? []).map((p) => [p.id, `${p.id}: ${p.description}`]), empty: 'default' }],
            ['stt_config.model', 'Model', 'choice', { options: (stt?.models ?? []).map((m) => [m, m]), free: !stt?.models, empty: stt?.default_model ? `default (${stt.default_model})` : 'default' }],
            ['stt_config.language', 'Language', 'choice', { options: (stt?.languages?.[sttModel] ?? []).map((l) => [l, l]), free: !stt?.languages?.[sttModel], empty: stt?.default_language ? `default (${stt.default_language})` : 'default' }],
            ['stt_config.keyterms', 'Key terms', 'list', { hint: 'one per line: names and words to hear right' }],
            ['stt_config.endpointing', 'Endpointing (ms)', 'number', { min: 0, max: 10000 }],
            ['stt_config.utterance_end_ms', 'Utterance end (ms)', 'number', { min: 0, max: 10000 }],
            ['stt_config.smart_format', 'Smart format', 'bool', { label: 'Smart format' }],
            ['stt_config.numerals', 'Numerals', 'bool', { label: 'Numerals as digits' }],
            ['stt_config.filler_words', 'Filler words', 'bool', { label: 'Keep filler words' }],
            ['stt_config.no_delay', 'No delay', 'bool', { label: 'No delay' }],
          ]],
          ['Voice (tts_config)', [
            ['tts_config.provider', 'Provider', 'choice', { options: (catalog?.tts ?? []).map((p) => [p.id, `${p.id}: ${p.description}`]) }],
            ['tts_config.voice_id', 'Voice', 'choice', { options: (tts?.voices ?? []).map((v) => [v, v]), free: !tts?.voices, hint: tts && !tts.voices ? 'the provider\u2019s voice id' : undefined }],
            ...(tts?.requires_url ? [['tts_config.base_url', 'Server URL', 'text', { hint: 'a server of OpenAI\u2019s /v1/audio/speech (Kokoro, Piper)' }]] : []),
            ['tts_config.model', 'Model', 'text', { hint: tts?.default_model ? `default ${tts.default_model}` : tts ? 'required' : undefined }],
            ['tts_config.language', 'Language', 'text'],
            ['tts_config.speed', 'Speed', 'number', { min: 0.25, max: 4, step: 0.05 }],
            ['tts_config.stability', 'Stability', 'number', { min: 0, max: 1, step: 0.05 }],
            ['tts_config.similarity_boost', 'Similarity boost', 'number', { min: 0, max: 1, step: 0.05 }],
            ['tts_config.style', 'Style', 'number', { min: 0, max: 1, step: 0.05 }],
            ['tts_config.use_speaker_boost', 'Speaker boost', 'bool', { label: 'Speaker boost' }],
            ['tts_config.apply_text_normalization', 'Text normalization', 'choice', { options: [['auto', 'auto'], ['on', 'on'], ['off', 'off']], empty: 'default' }],
            ['tts_config.apply_language_text_normalization', 'Language text normalization', 'bool', { label: 'Language text normalization' }],
          ]],
        ]),
    ['Speech (speech_config)', [
      ['speech_config.turn_taking.endpointing_min_delay', 'Endpointing min delay (s)', 'number', { min: 0, max: 30, step: 0.1 }],
      ['speech_config.turn_taking.endpointing_max_delay', 'Endpointing max delay (s)', 'number', { min: 0, max: 30, step: 0.1 }],
      ['speech_config.turn_taking.interruption_min_duration', 'Interruption min duration (s)', 'number', { min: 0, max: 30, step: 0.1 }],
      ['speech_config.turn_taking.interruption_min_words', 'Interruption min words', 'number', { min: 0, max: 100 }],
      ['speech_config.turn_taking.false_interruption_timeout', 'False interruption timeout (s)', 'number', { min: 0, max: 30, step: 0.1 }],
      ['speech_config.end_call_message', 'End call message', 'textarea'],
      ['speech_config.first_message_outbound', 'First message on outbound calls', 'textarea', { hint: 'said at once when a person answers' }],
      ['speech_config.background_audio.enabled', 'Background audio', 'bool', { label: 'Background audio' }],
      ['speech_config.background_audio.clip', 'Background clip', 'choice', { options: (catalog?.background_clips ?? []).map((c) => [c.id, `${c.id}: ${c.description}`]), free: true, freeHint: 'or an https URL of a WAV file' }],
      ['speech_config.background_audio.volume', 'Background volume', 'number', { min: 0, max: 1, step: 0.05 }],
      ['speech_config.silence.messages', 'Silence reminders', 'list', { hint: 'one per line, said in turn while the caller is silent' }],
      ['speech_config.silence.final_message', 'Last silence message', 'textarea'],
      ['speech_config.silence.first_check_seconds', 'First silence check (s)', 'number', { min: 1, max: 600 }],
      ['speech_config.silence.interval_seconds', 'Silence interval (s)', 'number', { min: 1, max: 600 }],
      ['speech_config.silence.max_attempts', 'Silence reminders at most', 'number', { min: 0, max: 20 }],
      ['speech_config.pronunciation', 'Pronunciation', 'json', { hint: '[{"from": "Acme", "to": "Ack-mee"}]', rows: 2 }],
    ]],
    ['The call', [
      ['max_duration_seconds', 'Longest call (s)', 'number', { min: 10, max: 43200 }],
      ['silence_timeout_seconds', 'Silence timeout (s)', 'number', { min: 1, max: 3600 }],
      ['autonomous_silence_handling', 'Autonomous silence handling', 'bool', { label: 'The model handles silences itself' }],
      ['voicemail_detection', 'Voicemail detection', 'bool', { label: 'Detect voicemail on outbound calls' }],
      ['voicemail_message', 'Voicemail message', 'textarea', { hint: 'left after the beep' }],
      ['recording_consent.enabled', 'Recording', 'bool', { label: 'Record calls (with the consent message first)' }],
      ['recording_consent.message', 'Consent message', 'textarea'],
      ['gdpr_mode', 'GDPR mode', 'bool', { label: 'GDPR mode: keep no transcript, recording or variables once the call is over' }],
    ]],
    ['Notifications and webhooks', [
      ['notification_email', 'Notification e-mail', 'text', { type: 'email' }],
      ['notification_emails', 'More notification e-mails', 'list', { hint: 'one per line' }],
      ['webhook_url', 'Webhook URL', 'text', { hint: 'overrides the account\u2019s webhook for this assistant\u2019s calls' }],
      ['webhook_secret', 'Webhook secret', 'text', { hint: 'shown masked; type a new one to replace it' }],
      ['webhook_events', 'Webhook events', 'events'],
    ]],
    ['Analysis (analysis_plan)', [['analysis_plan', 'Analysis plan', 'json', { hint: '{"structured_data_plan": {"enabled": true, "schema": {…}}, "min_messages_threshold": 2}', rows: 5 }]]],
  ];
};

function Control({ spec, fields, onSet, error, warnings }) {
  const [path, label, kind, o = {}] = spec;
  const value = getPath(fields, path);
  const set = (v) => onSet(path, v);
  if (kind === 'note') return html`<p class="hint note">${label}</p>`;
  if (kind === 'bool') {
    return html`<${Field} label=${label} path=${path} error=${error} warnings=${warnings}>
      ${({ id }) => html`<label class="check"><input id=${id} type="checkbox" name=${path} checked=${!!value} onChange=${(e) => set(e.currentTarget.checked)} /> ${o.label}</label>`}
    <//>`;
  }
  if (kind === 'json') return html`<${JsonField} label=${label} path=${path} error=${error} value=${value ?? undefined} onChange=${set} hint=${o.hint} rows=${o.rows ?? 3} />`;
  if (kind === 'events') {
    const chosen = value ?? [];
    return html`<${Field} label=${label} path=${path} error=${error} hint="none chosen: all four">
      ${() => html`<div class="checks">${EVENTS.map((ev) => html`<${Checkbox} label=${ev} checked=${chosen.includes(ev)} onChange=${(on) => set(on ? [...chosen, ev] : chosen.filter((x) => x !== ev))} />`)}</div>`}
    <//>`;
  }
  return html`<${Field} label=${label} path=${path} error=${error} hint=${o.hint} wide=${kind === 'textarea' || kind === 'list'} warnings=${warnings}>
    ${({ id, describedBy }) => {
      const common = { id, name: path, 'aria-describedby': describedBy };
      if (kind === 'textarea') return html`<${TextArea} ...${common} value=${value} onInput=${set} rows="2" />`;
      if (kind === 'number') return html`<${NumberInput} ...${common} value=${value} onInput=${set} min=${o.min} max=${o.max} step=${o.step ?? 1} />`;
      if (kind === 'list') return html`<${TextArea} ...${common} rows="3" value=${(value ?? []).join('\n')} onInput=${(t) => set(t.split('\n').map((l) => l.trim()).filter(Boolean).length ? t.split('\n').map((l) => l.trim()).filter(Boolean) : undefined)} />`;
      if (kind === 'choice') {
        const known = o.options.some(([v]) => v === value);
        if (o.free && (!o.options.length || (value && !known))) {
          return html`<div class="choice">
            ${o.options.length ? html`<${Select} value="" options=${o.options} empty="(type a value)" onChange=${(v) => v && set(v)} aria-label=${`${label}: choose`} />` : null}
            <${TextInput} ...${common} value=${value} onInput=${set} placeholder=${o.freeHint ?? o.empty ?? ''} />
          </div>`;
        }
        return html`<${Select} ...${common} value=${value ?? ''} options=${o.options} empty=${o.empty} onChange=${(v) => set(v || undefined)} />`;
      }
      return html`<${TextInput} ...${common} type=${o.type ?? 'text'} value=${value} onInput=${set} required=${o.required} />`;
    }}
  <//>`;
}

export function AssistantPage({ id }) {
  const isNew = id === 'new';
  const [catalog, setCatalog] = useState(null);
  const [original, setOriginal] = useState(null);
  const [fields, setFields] = useState(null);
  const [warnings, setWarnings] = useState([]);
  const [error, setError] = useState(null);
  const [loadError, setLoadError] = useState(null);
  const [saving, setSaving] = useState(false);
  const [notice, setNotice] = useState(null);
  const [assistants, setAssistants] = useState([]);

  useEffect(() => {
    setFields(null);
    setError(null);
    setNotice(null);
    get('/catalog').then(({ catalog: c }) => setCatalog(c)).catch(setLoadError);
    if (isNew) {
      setOriginal(null);
      setFields({ ...NEW_ASSISTANT });
      setWarnings([]);
      return;
    }
    get(`/assistants/${id}`)
      .then(({ assistant, warnings: w }) => {
        const own = Object.fromEntries(Object.entries(assistant).filter(([k, v]) => !READ_ONLY.includes(k) && v !== null));
        setOriginal(own);
        setFields(own);
        setWarnings(w ?? []);
        setAssistants([assistant]);
      })
      .catch(setLoadError);
  }, [id]);

  const sections = useMemo(() => (fields ? SECTIONS(catalog, fields) : []), [catalog, fields]);
  if (loadError) return html`<div class="page"><${PageHead} title="Assistant" /><${ErrorBox} error=${loadError} /><p><a href="#/assistants">All assistants</a></p></div>`;
  if (!fields) return html`<div class="page"><${PageHead} title="Assistant" /><${Loading} /></div>`;

  const onSet = (path, v) => {
    setNotice(null);
    let next = setPath(fields, path, v);
    // a speech-to-speech model takes no transcriber and no voice
    if (path === 'llm_config.provider' && realtimeIds(catalog).includes(v)) {
      delete next.stt_config;
      delete next.tts_config;
    }
    if (path === 'llm_config.provider' || path === 'stt_config.provider' || path === 'tts_config.provider') {
      const block = path.split('.')[0];
      if (!v) delete next[block];
      else {
        // another provider's model, voice, language or server would not be its; the rest stays (the prompt, the tools)
        const kept = { ...next[block] };
        for (const k of ['model', 'voice_id', 'language', 'url', 'base_url']) delete kept[k];
        next = { ...next, [block]: { ...kept, provider: v } };
      }
    }
    setFields(next);
  };

  const changed = () => {
    const out = {};
    const keys = new Set([...Object.keys(original ?? {}), ...Object.keys(fields)]);
    for (const k of keys) {
      if (JSON.stringify(original?.[k]) === JSON.stringify(fields[k])) continue;
      out[k] = fields[k] === undefined ? null : fields[k];
    }
    return out;
  };
  const save = async (e) => {
    e.preventDefault();
    setSaving(true);
    setNotice(null);
    try {
      const body = isNew ? Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) : changed();
      const res = isNew ? await api('POST', '/assistants', body) : await api('PATCH', `/assistants/${id}`, body);
      setError(null);
      setWarnings(res.warnings ?? []);
      if (isNew) return navigate(`/assistants/${res.assistant.id}`);
      const own = Object.fromEntries(Object.entries(res.assistant).filter(([k, v]) => !READ_ONLY.includes(k) && v !== null));
      setOriginal(own);
      setFields(own);
      setNotice({ text: `Saved at ${new Date().toLocaleTimeString()}.${res.warnings?.length ? ' With warnings: see below.' : ''}`, bad: false });
    } catch (err) {
      setError(err);
      setNotice({ text: `Not saved: ${err.error}${err.details.length ? ` (${err.details.length} problem${err.details.length > 1 ? 's' : ''}, beside the fields)` : `: ${err.message}`}`, bad: true });
    } finally {
      setSaving(false);
    }
    return undefined;
  };
  const remove = async () => {
    try {
      await api('DELETE', `/assistants/${id}`);
      navigate('/assistants');
    } catch (err) {
      setError(err);
      setNotice({ text: `Not deleted: ${err.message}`, bad: true });
    }
  };

  const paths = sections.flatMap(([, specs]) => specs.map((s) => s[0]));
  const dirty = !isNew && Object.keys(changed()).length > 0;
  const sandbox = isSandboxAssistant(fields);
  return html`<div class="page assistant-page">
    <${PageHead}
      title=${isNew ? 'New assistant' : fields.name || 'Assistant'}
      sub=${html`${sandbox ? html`<${Badge} kind="sandbox" title="runs on the sandbox providers: no keys, no intelligence (docs/sandbox.md)">sandbox<//>` : null} ${fields.is_active === false ? html`<${Badge} kind="muted">inactive<//>` : null} ${dirty ? html`<${Badge} kind="warn">unsaved changes<//>` : null}`}
    >
      <a class="button quiet" href="#/assistants">All assistants</a>
      <button type="submit" form="assistant-form" id="save-assistant" disabled=${saving}>${isNew ? 'Create' : 'Save'}</button>
    <//>
    ${notice ? html`<p id="assistant-status" class=${notice.bad ? 'status bad' : 'status'} role="status">${notice.text}</p>` : null}
    ${warnings.length
      ? html`<div class="warn-box" id="assistant-warnings" role="status"><strong>Missing keys</strong> The assistant is saved, but its calls are refused at start until these are set on the server:
          <ul>${warnings.map((w) => html`<li>${w}</li>`)}</ul></div>`
      : null}
    <${ErrorBox} error=${error} details=${unclaimed(error, paths)} />
    ${sandbox && isNew ? html`<p class="hint">A new assistant starts on the sandbox providers, which need no keys: pick real providers below when you have their keys.</p>` : null}
    <form id="assistant-form" class="sections" onSubmit=${save} novalidate>
      ${sections.map(
        ([title, specs]) => html`<fieldset class="panel">
          <legend>${title}</legend>
          <div class="grid">${specs.map((spec) => html`<${Control} key=${spec[0]} spec=${spec} fields=${fields} onSet=${onSet} error=${error} warnings=${warnings} />`)}</div>
        </fieldset>`,
      )}
    </form>
    ${isNew
      ? null
      : html`<${TryPanel} assistants=${assistants} assistantId=${id} workflowId=${null} note="the saved assistant alone, no workflow" />
          <section class="panel danger-zone">
            <h2>Delete this assistant</h2>
            <p class="hint">Refused while a number uses it.</p>
            <${ConfirmButton} id="delete-assistant" onConfirm=${remove} confirmLabel="Delete it for good?">Delete assistant<//>
          </section>`}
  </div>`;
}
