/**
 * A warm transfer's join on SIP (DECISIONS 16, docs/transfers.md): Switchboard relays the
 * caller's dialog and the operator's to each other until either hangs up, then hangs up the
 * other. Each RTP payload goes on as it came (no transcoding between two G.711 legs of one codec;
 * PCMU and PCMA are mapped by table), sent the moment the receiving leg plays it out of its
 * jitter buffer, which holds nothing that arrives in order: the relay adds no frame of delay.
 * Each leg keeps its own SSRC, sequence and clock (a back-to-back user agent). Key presses go
 * across as RFC 4733 events; a leg silent for the liveness limit is gone; while the call is
 * recorded, both directions go on into the recording (`JoinTap`).
 */
import type { Logger } from 'pino';
import type { JoinedLegs, JoinTap } from '../../calls/operator-leg.js';
import type { MediaLiveness, StreamWatcher } from '../liveness.js';
import type { Dialog, Dialogs } from './dialogs.js';
import { ALAW_TO_MULAW } from './rtp.js';
import type { G711 } from './sdp.js';

export interface BridgeOptions {
  dialogs: Dialogs;
  watcher: StreamWatcher;
  liveness: MediaLiveness;
  log: Logger;
  /** The call's recording, while it is recorded. */
  tap?: JoinTap | undefined;
}

/** μ-law of a relayed payload, for the recording. */
function mulawOf(payload: Buffer, codec: G711): Buffer {
  if (codec === 'PCMU') return payload;
  const out = Buffer.allocUnsafe(payload.length);
  for (let i = 0; i < payload.length; i++) out[i] = ALAW_TO_MULAW[payload[i]!]!;
  return out;
}

/**
 * Relays `caller` and `operator` to each other. The operator's dialog is released when the
 * bridge ends; the caller's stays with its call, which releases it as it closes.
 */
export function bridgeDialogs(caller: Dialog, operator: Dialog, o: BridgeOptions): JoinedLegs {
  let over = false;
  let done: () => void = () => undefined;
  const ended = new Promise<void>((resolve) => (done = resolve));
  const tap = o.tap;
  caller.rtp.relay = tap
    ? (payload, codec) => {
        operator.rtp.sendPayload(payload, codec);
        tap.caller(mulawOf(payload, codec));
      }
    : (payload, codec) => operator.rtp.sendPayload(payload, codec);
  operator.rtp.relay = tap
    ? (payload, codec) => {
        caller.rtp.sendPayload(payload, codec);
        tap.operator(mulawOf(payload, codec));
      }
    : (payload, codec) => caller.rtp.sendPayload(payload, codec);
  const now = performance.now();
  caller.rtp.lastPacketAt = Math.max(caller.rtp.lastPacketAt, now);
  operator.rtp.lastPacketAt = Math.max(operator.rtp.lastPacketAt, now);

  const finish = async (why: string): Promise<void> => {
    if (over) return;
    over = true;
    unwatch();
    caller.rtp.relay = null;
    operator.rtp.relay = null;
    o.log.info({ callId: caller.callId, why }, 'warm transfer: the joined legs are over');
    // the other leg gets its BYE (a leg that hung up has its dialog ended already)
    await Promise.all([o.dialogs.bye(caller), o.dialogs.bye(operator)]).catch((err: unknown) => o.log.warn({ err }, 'a joined leg could not be hung up'));
    o.dialogs.release(operator);
    done();
  };
  caller.peer = { audio: () => undefined, dtmf: (digit) => operator.rtp.sendDtmf(digit), hungUp: () => void finish('the caller hung up') };
  operator.peer = { audio: () => undefined, dtmf: (digit) => caller.rtp.sendDtmf(digit), hungUp: () => void finish('the operator hung up') };

  const silent = (d: Dialog) => d.negotiated.direction === 'inactive' || d.negotiated.direction === 'recvonly';
  const unwatch = o.watcher.watch((at) => {
    for (const [d, who] of [
      [caller, 'caller'],
      [operator, 'operator'],
    ] as const) {
      // on hold a leg sends nothing: that is no hang-up
      if (silent(d)) d.rtp.lastPacketAt = at;
      if (at - d.rtp.lastPacketAt > o.liveness.idleMs) {
        void finish(`no RTP from the ${who} for ${Math.round((at - d.rtp.lastPacketAt) / 1000)} s`);
        return;
      }
    }
  });
  if (caller.ended) void finish('the caller hung up');
  else if (operator.ended) void finish('the operator hung up');
  return { ended, hangUp: () => finish('hung up by Switchboard') };
}
