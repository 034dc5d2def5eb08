/**
 * A web call's warm transfer (DECISIONS 16, docs/transfers.md): the browser has no carrier, so
 * the operator is dialled through the account's SIP trunk (src/telephony/sip/operator-dial.ts),
 * and at the join Switchboard relays the browser's audio (16 kHz PCM) and the operator's RTP
 * (μ-law 8 kHz) to each other, resampled as they pass, until either hangs up. Without a trunk (or
 * with SIP off on this server) the transfer fails, saying why.
 */
import type { Logger } from 'pino';
import { AudioBridge } from '../../audio/bridge.js';
import { OperatorDialError, type JoinedLegs, type JoinTap, type OperatorDialOptions, type OperatorLeg } from '../../calls/operator-leg.js';
import type { CallRecord } from '../../calls/store.js';
import type { AudioFormat } from '../../calls/transport.js';
import type { Store } from '../../store/index.js';
import type { MediaLiveness, StreamWatcher } from '../liveness.js';
import type { Dialog } from '../sip/dialogs.js';
import type { OperatorDialler } from '../sip/operator-dial.js';

/** What the relay needs of the browser's socket. */
export interface BrowserRelayLink {
  /** From now on the browser's audio, keys and hang-up go to `relay` (null: to the call again). */
  relayTo(relay: { audio(pcm: Buffer): void; dtmf(digit: string): void; hungUp(): void } | null): void;
  /** One frame of audio to the browser, in its format. */
  send(pcm: Buffer): void;
  /** The browser left already. */
  readonly gone: boolean;
}

export interface WebOperatorOptions {
  store: Store;
  /** The SIP side's operator dialler; null with SIP off on this server. */
  operators(): OperatorDialler | null;
  watcher: StreamWatcher;
  liveness: MediaLiveness;
  log: Logger;
}

export async function dialWebOperator(
  o: WebOperatorOptions,
  record: CallRecord,
  format: AudioFormat,
  link: BrowserRelayLink,
  destination: string,
  options: OperatorDialOptions,
): Promise<OperatorLeg> {
  const account = await o.store.account.get(record.organization_id);
  const trunk = account.sip?.outbound;
  if (!trunk) throw new OperatorDialError('failed', 'web call: the account has no SIP trunk to dial the operator through (PATCH /account with sip.outbound)');
  const operators = o.operators();
  if (!operators) throw new OperatorDialError('failed', 'web call: SIP is off on this server (SIP_PORT=0): no operator can be dialled');
  return operators.dial({
    trunk,
    destination,
    options,
    callId: record.id,
    join: async (operator, tap) => relayBrowser(link, format, operator, operators, o, tap),
  });
}

/** Relays the browser and the operator's dialog until either hangs up. */
function relayBrowser(link: BrowserRelayLink, format: AudioFormat, operator: Dialog, operators: OperatorDialler, o: WebOperatorOptions, tap: JoinTap | undefined): JoinedLegs {
  if (link.gone) throw new Error('the browser left before the join');
  const bridge = AudioBridge.for(format);
  let over = false;
  let done: () => void = () => undefined;
  const ended = new Promise<void>((resolve) => (done = resolve));
  const finish = async (why: string) => {
    if (over) return;
    over = true;
    unwatch();
    link.relayTo(null);
    o.log.info({ callId: operator.callId, why }, 'warm transfer: the joined legs are over');
    await operators.hangUp(operator);
    done();
  };
  link.relayTo({
    audio: (pcm) => {
      const mulaw = bridge ? bridge.toProviders(pcm) : pcm;
      operator.rtp.send(mulaw);
      tap?.caller(mulaw);
    },
    dtmf: (digit) => operator.rtp.sendDtmf(digit),
    hungUp: () => void finish('the browser hung up'),
  });
  operator.peer = {
    audio: (mulaw) => {
      link.send(bridge ? bridge.fromProviders(mulaw) : mulaw);
      tap?.operator(mulaw);
    },
    dtmf: () => undefined,
    hungUp: () => void finish('the operator hung up'),
  };
  operator.rtp.lastPacketAt = performance.now();
  const unwatch = o.watcher.watch((now) => {
    if (now - operator.rtp.lastPacketAt > o.liveness.idleMs && operator.negotiated.direction !== 'inactive' && operator.negotiated.direction !== 'recvonly') {
      void finish('no RTP from the operator');
    }
  });
  return { ended, hangUp: () => finish('hung up by Switchboard') };
}
