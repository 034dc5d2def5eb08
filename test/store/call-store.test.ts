/** One-time media-stream tokens and call records, on the in-process store and on Redis. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryCallStore, recordJson, RedisCallStore, transition, type CallStore } from '../../src/calls/store.js';
import { callRecord } from '../helpers/call-record.js';

const redisUrl = process.env.REDIS_URL;
const prefix = `sb-test-${randomUUID()}:`;
const stores: [string, () => CallStore][] = [['in process', () => new MemoryCallStore()]];
if (redisUrl) stores.push(['Redis', () => new RedisCallStore(redisUrl, prefix)]);

afterAll(async () => {
  if (!redisUrl) return;
  const r = new Redis(redisUrl);
  const keys = await r.keys(`${prefix}*`);
  if (keys.length > 0) await r.del(...keys);
  await r.quit();
});

describe.each(stores)('stream tokens (%s)', (_name, make) => {
  it('are taken once, by the right token only; a wrong guess does not use them up', async () => {
    const store = make();
    try {
      const callId = randomUUID();
      await store.putStreamToken(callId, 'right-token', 60);
      expect(await store.consumeStreamToken(callId, 'wrong-token')).toBe(false);
      expect(await store.consumeStreamToken(randomUUID(), 'right-token')).toBe(false);
      expect(await store.consumeStreamToken(callId, 'right-token')).toBe(true);
      expect(await store.consumeStreamToken(callId, 'right-token')).toBe(false);
    } finally {
      await store.close();
    }
  });

  it('expire', async () => {
    const store = make();
    try {
      const callId = randomUUID();
      await store.putStreamToken(callId, 'token', 1);
      await new Promise((r) => setTimeout(r, 1_200));
      expect(await store.consumeStreamToken(callId, 'token')).toBe(false);
    } finally {
      await store.close();
    }
  });
});

describe('recordJson', () => {
  it('reads back as JSON.stringify does, for any assistant, workflow and the rest (property)', () => {
    const part = fc.oneof(fc.constant(null), fc.dictionary(fc.string(), fc.jsonValue()));
    fc.assert(
      fc.property(part, part, fc.dictionary(fc.string(), fc.jsonValue()), (assistant, definition, rest) => {
        const record = { ...callRecord(), ...rest, assistant, definition } as ReturnType<typeof callRecord>;
        expect(JSON.parse(recordJson(record))).toEqual(JSON.parse(JSON.stringify(record)));
        // made again, from the parts it keeps: the same
        expect(JSON.parse(recordJson(record))).toEqual(JSON.parse(JSON.stringify(record)));
      }),
    );
  });

  it('sees a new assistant or workflow object at once', () => {
    const record = callRecord({ assistant: { name: 'first' }, definition: { entry_node: 'a' } });
    expect(JSON.parse(recordJson(record))).toMatchObject({ assistant: { name: 'first' }, definition: { entry_node: 'a' } });
    record.assistant = { name: 'second' };
    record.definition = null;
    expect(JSON.parse(recordJson(record))).toMatchObject({ assistant: { name: 'second' }, definition: null });
  });
});

describe.each(stores)('call records (%s)', (_name, make) => {
  it('a session saved before errors had codes (plain strings) reads them as UNKNOWN entries; new entries as they are', async () => {
    const store = make();
    try {
      // as a live call's session written by an earlier version sits in Redis
      const record = callRecord({ organization_id: randomUUID(), errors: ['elevenlabs: quota exceeded', { code: 'PROVIDER_AUTH', message: 'deepgram: invalid API key', provider: 'deepgram' }] as never });
      await store.create(record);
      const expected = [
        { code: 'UNKNOWN', message: 'elevenlabs: quota exceeded' },
        { code: 'PROVIDER_AUTH', message: 'deepgram: invalid API key', provider: 'deepgram' },
      ];
      expect((await store.get(record.id))?.errors).toEqual(expected);
      expect((await store.list(record.organization_id, 10)).map((r) => r.errors)).toEqual([expected]);
    } finally {
      await store.close();
    }
  });

  it('a record holding an unpaired surrogate moves from one status to the next (it is kept as U+FFFD)', async () => {
    const store = make();
    try {
      const record = callRecord({ organization_id: randomUUID(), status: 'queued', customer: { number: '+15005550006', name: 'Mon\udc00 \ud800ami 😀' } });
      await store.create(record);
      const moved = await transition(store, record.id, (r) => {
        r.status = 'ringing';
        return true;
      });
      expect(moved?.status).toBe('ringing');
      expect((await store.get(record.id))?.customer?.name).toBe('Mon\ufffd \ufffdami 😀');
    } finally {
      await store.close();
    }
  });

  it('save copies the record before it returns, and saves made in a row land in that order', async () => {
    const store = make();
    try {
      const record = callRecord({ current_node: 'greeting', nodes_visited: ['greeting'] });
      await store.create(record);
      // not awaited in between, and the record changed right after each call (as the call ledger does)
      const saves: Promise<void>[] = [];
      for (const node of ['hours', 'booking', 'hours', 'goodbye']) {
        record.current_node = node;
        record.nodes_visited.push(node);
        saves.push(store.save(record));
        record.current_node = 'changed-after-save';
        record.messages.push({ role: 'user', content: `after ${node}`, time: new Date().toISOString(), seconds_from_start: 0, node_id: node });
      }
      await Promise.all(saves);
      const saved = await store.get(record.id);
      expect(saved?.current_node).toBe('goodbye');
      expect(saved?.nodes_visited).toEqual(['greeting', 'hours', 'booking', 'hours', 'goodbye']);
      // the last save was made before its message was pushed
      expect(saved?.messages.map((m) => m.content)).toEqual(['after hours', 'after booking', 'after hours']);
    } finally {
      await store.close();
    }
  });

  it('saveRunning: a read gives the call with the engine snapshot of that moment, never older than the save; save copies again', async () => {
    const store = make();
    const inProcess = store instanceof MemoryCallStore;
    try {
      const record = callRecord({ current_node: 'greeting', nodes_visited: ['greeting'] });
      await store.create(record);
      let turn = 1;
      let snapshots = 0;
      const engine = () => {
        snapshots++;
        return { value: 'conversation', turn };
      };
      record.current_node = 'hours';
      await store.saveRunning(record, engine);
      // Redis writes the snapshot now; the in-process store makes it only when the call is read
      expect(snapshots).toBe(inProcess ? 0 : 1);
      turn = 2;
      record.messages.push({ role: 'user', content: 'after the save', time: new Date().toISOString(), seconds_from_start: 0, node_id: 'hours' });
      const read = await store.get(record.id);
      expect(read?.current_node).toBe('hours');
      expect(read?.engine).toEqual({ value: 'conversation', turn: inProcess ? 2 : 1 });
      expect(read?.messages.map((m) => m.content)).toEqual(inProcess ? ['after the save'] : []);
      // a read is a copy either way
      read!.messages.length = 0;
      expect((await store.get(record.id))?.messages).toHaveLength(inProcess ? 1 : 0);
      expect((await store.list(record.organization_id, 10)).map((r) => r.id)).toContain(record.id);
      // a save writes the record as it is (its own engine field), and copies it: changes after it stay out of the store
      record.engine = engine();
      await store.save(record);
      record.current_node = 'changed-after-save';
      turn = 3;
      const saved = await store.get(record.id);
      expect(saved?.current_node).toBe('hours');
      expect(saved?.engine).toEqual({ value: 'conversation', turn: 2 });
      // an ended call is copied at once, without its workflow
      record.status = 'ended';
      await store.saveRunning(record, engine);
      record.current_node = 'after-the-end';
      expect(await store.get(record.id)).toMatchObject({ status: 'ended', current_node: 'changed-after-save', engine: { turn: 3 }, definition: null });
    } finally {
      await store.close();
    }
  });

  it('saveRunning: an engine snapshot that cannot be made leaves the record\'s own, and the read still answers', async () => {
    const store = make();
    try {
      // a running call's own record has no snapshot in it (the store made it, from the engine)
      const record = callRecord({ current_node: 'greeting', engine: null });
      await store.create(record);
      const failing = () => {
        throw new Error('the engine cannot say');
      };
      if (store instanceof MemoryCallStore) {
        await store.saveRunning(record, failing);
        expect(await store.get(record.id)).toMatchObject({ current_node: 'greeting', engine: null });
        expect(await store.list(record.organization_id, 10)).toHaveLength(1);
      } else {
        // written at once: the save fails (the ledger logs it) and the stored record stays as it was
        await store.saveRunning(record, () => ({ value: 'last good' }));
        await expect(store.saveRunning(record, failing)).rejects.toThrow('the engine cannot say');
        expect(await store.get(record.id)).toMatchObject({ engine: { value: 'last good' } });
      }
    } finally {
      await store.close();
    }
  });

  it('saveRunning: a status the call moved to since its last save is the one a status transition compares (as a read gives it)', async () => {
    const store = make();
    try {
      const record = callRecord();
      await store.create(record);
      await store.saveRunning(record, () => ({ value: 'conversation' }));
      // the call moves on in place (a transfer under way) and has not saved since
      record.status = 'forwarding';
      const moved = await transition(store, record.id, (r) => {
        if (r.status !== 'forwarding') return false;
        r.transport_ids.forwarded_to = '+15550100';
        return true;
      });
      if (store instanceof MemoryCallStore) {
        // what a read shows and what the write compares agree: one write, no retries
        expect(moved?.transport_ids.forwarded_to).toBe('+15550100');
        expect((await store.get(record.id))?.transport_ids.forwarded_to).toBe('+15550100');
        expect(await store.findStale(60_000)).toEqual([]);
      } else {
        // Redis holds the last save: in progress, so the change declines
        expect(moved).toBeNull();
      }
    } finally {
      await store.close();
    }
  });

  it('keeps a live call\'s workflow snapshot and drops an ended call\'s (created or saved ended), leaving the caller\'s record alone', async () => {
    const store = make();
    try {
      const definition = { version: 1, entry_node: 'greeting', nodes: [], edges: [] };
      const live = callRecord({ definition });
      await store.create(live);
      expect((await store.get(live.id))?.definition).toEqual(definition);
      live.status = 'ended';
      await store.save(live);
      expect((await store.get(live.id))?.definition).toBeNull();
      expect(live.definition).toEqual(definition);
      const refused = callRecord({ status: 'ended', definition });
      await store.create(refused);
      expect((await store.get(refused.id))?.definition).toBeNull();
    } finally {
      await store.close();
    }
  });
});
