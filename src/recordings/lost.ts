/**
 * The recording of a call whose process died (`worker-lost`): the process that ends the call keeps
 * what the recorder had written, when the file is on this machine (the embedded default after a
 * restart, or processes sharing `DATA_DIR`), and the call's `recording_url` names it.
 */
import type { Logger } from 'pino';
import type { CallMedia } from '../calls/call-audio.js';
import type { CallRecord } from '../calls/store.js';
import { recordingKey, recordingPath } from './storage.js';

export async function keepLostRecording(media: CallMedia | undefined, record: CallRecord, log: Logger): Promise<void> {
  const store = media?.recordings;
  const assistant = record.assistant as { recording_consent?: { enabled?: boolean }; gdpr_mode?: boolean };
  if (!store || !assistant.recording_consent?.enabled || assistant.gdpr_mode) return;
  try {
    if (!(await store.salvage(recordingKey(record.organization_id, record.id)))) return;
    record.recording_url = `${(media.publicUrl ?? '').replace(/\/+$/, '')}${recordingPath(record.id)}`;
    log.info({ callId: record.id }, 'kept the recording of a call whose process stopped');
  } catch (err) {
    log.warn({ err, callId: record.id }, 'the recording of a call whose process stopped could not be kept');
  }
}
