/**
 * A SIP call's `CallTransport`: what the call layer sees of a dialog. Its audio goes out as RTP
 * (the keys the model presses as RFC 4733 telephone-events), its marks are played by the clock
 * (RTP has none: audio counts as played once its time has passed at the far end), `clear` drops
 * what was not sent, the hang-up is a BYE and the transfer a REFER. It also watches the dialog's
 * RTP: a keep-alive frame while the assistant is silent, and the far end gone after the liveness
 * limit without its packets.
 */
import { SipTransferError } from './errors.js';
import type { Logger } from 'pino';
import type { CallRecord } from '../../calls/store.js';
import { MULAW_8K, type CallTransport } from '../../calls/transport.js';
import type { Store } from '../../store/index.js';
import type { MediaLiveness, StreamWatcher } from '../liveness.js';
import { parseSipProxy } from './addresses.js';
import type { Dialog, Dialogs } from './dialogs.js';
import { parseUri } from './message.js';
import { OperatorDialError } from '../../calls/operator-leg.js';
import { bridgeDialogs } from './bridge.js';
import type { OperatorDialler } from './operator-dial.js';

/** How long after the last audio frame we sent the far end has played it (its jitter buffer). */
const PLAYOUT_MS = 60;
/** With nothing sent for this long, a frame of silence goes (RTP keep-alive). */
const KEEPALIVE_MS = 1_000;
const SILENT_FRAME = Buffer.alloc(160, 0xff);

export interface SipTransportOptions {
  dialogs: Dialogs;
  store: Store;
  watcher: StreamWatcher;
  liveness: MediaLiveness;
  /** Our address, in a REFER's Referred-By. */
  publicAddress: string;
  log: Logger;
  /** Warm transfers' operators, dialled through the account's trunk (./operator-dial.ts). */
  operators?: OperatorDialler;
}

export function sipTransport(dialog: Dialog, record: CallRecord, o: SipTransportOptions): CallTransport {
  const { dialogs } = o;
  let audioEndsAt = 0;
  /** Joined to a warm transfer's operator: the call's own audio no longer goes to the caller. */
  let joined = false;
  const marks = new Map<NodeJS.Timeout, string>();
  const call = () => dialog.call;
  const played = (timer: NodeJS.Timeout) => {
    const name = marks.get(timer);
    marks.delete(timer);
    if (name !== undefined) dialogs.toCall(dialog, 'mark', (c) => c.played(name));
  };
  const unwatch = o.watcher.watch((now) => {
    if (dialog.ended || !call()) return;
    // on hold (the peer sends nothing while `inactive` or `recvonly`), silence is not a hang-up
    const peerSilent = dialog.negotiated.direction === 'inactive' || dialog.negotiated.direction === 'recvonly';
    if (peerSilent) dialog.rtp.lastPacketAt = now;
    // while the assistant is silent, a packet of silence now and then: a trunk's RTP timeout
    // and the NAT path to it must not take a long caller turn for a dead call
    if (now - dialog.rtp.lastSentAt > KEEPALIVE_MS) dialog.rtp.send(SILENT_FRAME);
    if (now - dialog.rtp.lastPacketAt > o.liveness.idleMs) {
      const why = `no RTP from the far end for ${Math.round((now - dialog.rtp.lastPacketAt) / 1000)} s`;
      dialogs.toCall(dialog, 'far end gone', (c) => c.farEndGone(why));
    }
  });
  dialog.cleanups.push(unwatch, () => {
    for (const timer of marks.keys()) clearTimeout(timer);
    marks.clear();
  });
  return {
    kind: 'sip',
    audioFormat: MULAW_8K,
    sendAudio: (frame) => {
      if (dialog.ended || joined) return;
      const now = performance.now();
      audioEndsAt = Math.max(audioEndsAt, now) + (frame.length / 8);
      dialog.rtp.send(frame);
    },
    // keys the model pressed: RFC 4733 telephone-events in their frames' slots (the tone, for a
    // peer that negotiated no telephone-event)
    sendKeyFrame: (key, frame) => {
      if (dialog.ended) return;
      audioEndsAt = Math.max(audioEndsAt, performance.now()) + frame.length / 8;
      dialog.rtp.sendKey(key, frame);
    },
    // RTP has no marks: the audio before one has played once its time has passed at the far end
    mark: (name) => {
      const timer: NodeJS.Timeout = setTimeout(() => played(timer), Math.max(0, audioEndsAt - performance.now()) + PLAYOUT_MS);
      marks.set(timer, name);
    },
    clear: () => {
      // what was sent is sent; what the call has not sent yet never goes. Pending marks come back.
      audioEndsAt = performance.now();
      for (const timer of [...marks.keys()]) {
        clearTimeout(timer);
        played(timer);
      }
      dialog.rtp.silence();
    },
    hangUp: async () => {
      await dialogs.bye(dialog);
    },
    transfer: async (destination) => {
      const account = await o.store.account.get(record.organization_id);
      const proxy = account.sip?.outbound ? parseSipProxy(account.sip.outbound.proxy) : null;
      const host = proxy ? `${proxy.host}${proxy.port !== 5060 ? `:${proxy.port}` : ''}` : (parseUri(dialog.remoteTarget)?.host ?? dialog.remote.address);
      const referTo = `<sip:${destination}@${host}>`;
      const response = await dialogs.request(dialog, 'REFER', [
        ['refer-to', referTo],
        ['referred-by', `<sip:${record.phone_number?.number ?? 'switchboard'}@${o.publicAddress}>`],
      ]);
      if (response.status < 200 || response.status >= 300) {
        throw new SipTransferError(`sip: the far end refused the transfer (REFER answered ${response.status} ${response.reason})`, response.status);
      }
      o.log.info({ callId: record.id, referTo }, 'transfer taken by the far end (REFER accepted)');
    },
    dialOperator: async (destination, options) => {
      const operators = o.operators;
      if (!operators) throw new OperatorDialError('failed', 'sip: operators cannot be dialled from this process');
      const account = await o.store.account.get(record.organization_id);
      const trunk = account.sip?.outbound;
      if (!trunk) throw new OperatorDialError('failed', 'sip: the account has no SIP trunk to dial the operator through (PATCH /account with sip.outbound)');
      return operators.dial({
        trunk,
        destination,
        options,
        callId: record.id,
        codec: dialog.negotiated.codec,
        join: async (operator, tap) => {
          if (dialog.ended) throw new Error('the caller hung up before the join');
          joined = true;
          return bridgeDialogs(dialog, operator, { dialogs, watcher: o.watcher, liveness: o.liveness, log: o.log, tap });
        },
      });
    },
    close: () => {
      void dialogs.bye(dialog).finally(() => dialogs.release(dialog));
    },
  };
}
