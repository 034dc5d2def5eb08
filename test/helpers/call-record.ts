/** A whole call record for store-level tests: an in-progress call with nothing in it yet. */
import { randomUUID } from 'node:crypto';
import { newCallRecord, type CallRecord } from '../../src/calls/store.js';

export function callRecord(patch: Partial<CallRecord> = {}): CallRecord {
  const record = newCallRecord({
    organization_id: randomUUID(),
    number_id: randomUUID(),
    phone_number: { number: '+15550100100', name: null },
    customer: { number: '+15005550006' },
    transport: 'twilio',
    transport_ids: { call_sid: `CA${'1'.repeat(32)}`, account_sid: `AC${'1'.repeat(32)}` },
  });
  return { ...record, status: 'in-progress', started_at: record.created_at, ...patch };
}
