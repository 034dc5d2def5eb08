/**
 * A warm transfer's operator on Twilio (DECISIONS 16, docs/transfers.md): the operator's call is
 * placed through the REST API from the call's number, with TwiML that streams it to us
 * (`<Connect><Stream>` on `OPERATOR_MEDIA_PATH`, a one-time `leg` parameter), so that the call
 * speaks the operator's message in the assistant's voice and hears the operator's keys on a
 * stream of its own; its status callbacks say busy, no answer, failed. The join moves both calls
 * into a `<Conference>` named after the call id (REST, new TwiML for each): the streams close and
 * Twilio carries the two; the recording ends there.
 *
 * The operator's stream must reach the process that holds the call (one process, or sticky
 * routing by the `leg` parameter): a leg no process waits for is refused.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import { OperatorDialError, type JoinedLegs, type OperatorDialOptions, type OperatorLeg, type OperatorLegEvents } from '../../calls/operator-leg.js';
import type { CallRecord } from '../../calls/store.js';
import { MULAW_8K } from '../../calls/transport.js';
import type { Store } from '../../store/index.js';
import { mediaAudio, mediaSender, parseTwilioMessage } from './media-protocol.js';
import type { TwilioCredentials, TwilioRest } from './rest.js';
import { verifyTwilioSignature, type FormParams } from './signature.js';
import { conferenceTwiml, connectStreamTwiml } from './twiml.js';

export const OPERATOR_MEDIA_PATH = '/telephony/twilio/operator/media';
export const OPERATOR_STATUS_PATH = '/telephony/twilio/operator/status';

export interface TwilioOperatorsOptions {
  rest: TwilioRest;
  store: Store;
  publicUrl: string;
  log: Logger;
}

/** A dial under way, by its `leg` token. */
interface Pending {
  callId: string;
  credentials: TwilioCredentials;
  callSid: string | null;
  /** The leg, once its stream started. */
  leg: TwilioOperatorLeg | null;
  settled: boolean;
  resolve(leg: OperatorLeg): void;
  reject(err: OperatorDialError): void;
}

export class TwilioOperators {
  private readonly pending = new Map<string, Pending>();
  /** How each dial's legs move into the conference, by `leg` token. */
  private readonly joiners = new Map<string, () => Promise<void>>();

  constructor(private readonly o: TwilioOperatorsOptions) {}

  /**
   * Places the operator's call; resolves once its stream started (the operator answered), rejects
   * with the result Twilio's status callback gives, or `no-answer` when given up (the call is
   * canceled, or hung up if it was answered meanwhile). `moveCaller` puts the caller's call into
   * the conference at the join.
   */
  async dial(record: CallRecord, destination: string, options: OperatorDialOptions, moveCaller: (twiml: string) => Promise<void>): Promise<OperatorLeg> {
    const account = await this.o.store.account.get(record.organization_id);
    const credentials = account.twilio;
    if (!credentials) throw new OperatorDialError('failed', 'twilio: the organization has no Twilio credentials');
    const token = randomUUID();
    const base = this.o.publicUrl.replace(/\/$/, '');
    const leg = new Promise<OperatorLeg>((resolve, reject) => {
      this.pending.set(token, { callId: record.id, credentials, callSid: null, leg: null, settled: false, resolve, reject });
    });
    const pending = this.pending.get(token)!;
    const joinTwiml = conferenceTwiml(record.id);
    // the leg is made when its stream starts (attachMedia); it joins through this
    this.joiners.set(token, async () => {
      await Promise.all([moveCaller(joinTwiml), this.o.rest.redirect(credentials, pending.callSid!, joinTwiml)]);
    });
    const settle = (err: OperatorDialError) => {
      if (pending.settled) return;
      pending.settled = true;
      this.pending.delete(token);
      this.joiners.delete(token);
      pending.reject(err);
    };
    const giveUp = () => {
      settle(new OperatorDialError('no-answer', 'the dial was given up'));
      const sid = pending.callSid;
      if (sid) void this.o.rest.cancel(credentials, sid).catch((err: unknown) => this.o.log.warn({ err, callId: record.id }, 'the operator\'s call could not be canceled'));
    };
    options.signal.addEventListener('abort', giveUp, { once: true });
    void leg.then(
      () => options.signal.removeEventListener('abort', giveUp),
      () => options.signal.removeEventListener('abort', giveUp),
    );
    try {
      pending.callSid = await this.o.rest.createCall(credentials, {
        to: destination,
        from: options.callerId ?? record.phone_number?.number ?? '',
        twiml: connectStreamTwiml(`${base.replace(/^http/, 'ws')}${OPERATOR_MEDIA_PATH}`, { leg: token }),
        statusCallback: `${base}${OPERATOR_STATUS_PATH}?leg=${token}`,
        timeoutSeconds: Math.max(5, Math.ceil(options.ringTimeoutMs / 1000)),
      });
    } catch (err) {
      settle(new OperatorDialError('failed', `twilio: ${(err as Error).message}`));
      return leg;
    }
    if (options.signal.aborted) giveUp();
    return leg;
  }

  /** `POST OPERATOR_STATUS_PATH?leg=…`: the operator's call's progress, signed with the account's token. */
  async status(url: string, params: FormParams, signature: string | undefined): Promise<{ status: 204 } | { status: 400 | 403 | 404; message: string }> {
    const token = new URL(url).searchParams.get('leg') ?? '';
    const pending = this.pending.get(token);
    if (!pending) return { status: 404, message: 'no operator call is waiting for this leg' };
    if (!verifyTwilioSignature(pending.credentials.auth_token, url, params, signature)) return { status: 403, message: 'invalid signature' };
    const status = typeof params.CallStatus === 'string' ? params.CallStatus : '';
    const reject = (result: 'busy' | 'no-answer' | 'failed', why: string) => {
      if (pending.settled) return;
      pending.settled = true;
      this.pending.delete(token);
      this.joiners.delete(token);
      pending.reject(new OperatorDialError(result, why));
    };
    switch (status) {
      case 'busy':
        reject('busy', 'twilio: the operator is busy');
        break;
      case 'no-answer':
      case 'canceled':
        reject('no-answer', `twilio: the operator did not answer (${status})`);
        break;
      case 'failed':
        reject('failed', `twilio: the operator's call failed${typeof params.ErrorCode === 'string' ? ` (${params.ErrorCode})` : ''}`);
        break;
      case 'completed':
        // answered but no stream came, or the operator hung up
        if (pending.leg) pending.leg.gone();
        else reject('failed', 'twilio: the operator\'s call ended before its stream started');
        this.pending.delete(token);
        this.joiners.delete(token);
        break;
      default:
    }
    return { status: 204 };
  }

  /** The operator's Media Streams socket: its `leg` parameter names the dial waiting for it. */
  attachMedia(ws: WebSocket, remote: string): void {
    let leg: TwilioOperatorLeg | null = null;
    const refuse = (why: string) => {
      this.o.log.warn({ remote, why }, 'operator stream refused');
      ws.close(1008, 'refused');
    };
    const startTimer = setTimeout(() => leg || refuse('no start message within 10 s'), 10_000);
    ws.on('message', (data, isBinary) => {
      if (isBinary) return refuse('binary frame');
      const audio = mediaAudio(data as Buffer);
      if (audio) return leg?.heard(audio);
      const parsed = parseTwilioMessage(data as Buffer);
      if (!parsed.ok) return;
      const m = parsed.message;
      switch (m.event) {
        case 'start': {
          if (leg) return;
          clearTimeout(startTimer);
          const token = m.start.customParameters?.leg ?? '';
          const pending = this.pending.get(token);
          const join = this.joiners.get(token);
          if (!pending || pending.settled || !join) return refuse('no operator call waits for this stream');
          pending.settled = true;
          leg = new TwilioOperatorLeg(ws, m.streamSid, pending.credentials, pending.callSid!, this.o.rest, join, this.o.log);
          pending.leg = leg;
          pending.resolve(leg);
          return;
        }
        case 'media':
          return leg?.heard(m.audio);
        case 'dtmf':
          return leg?.key(m.dtmf.digit);
        case 'stop':
          return leg?.gone();
        default:
      }
    });
    ws.on('close', () => {
      clearTimeout(startTimer);
      leg?.gone();
    });
    ws.on('error', () => undefined);
  }
}

/** The operator's leg over its own Media Streams socket. */
class TwilioOperatorLeg implements OperatorLeg {
  readonly audioFormat = MULAW_8K;
  private events: OperatorLegEvents | null = null;
  private over = false;
  /** In the conference: the stream's end is the move, not a hang-up. */
  private moved = false;
  private readonly media;

  constructor(
    private readonly ws: WebSocket,
    streamSid: string,
    private readonly credentials: TwilioCredentials,
    private readonly callSid: string,
    private readonly rest: TwilioRest,
    private readonly joinBoth: () => Promise<void>,
    private readonly log: Logger,
  ) {
    this.media = mediaSender(streamSid, 1, (message) => {
      if (ws.readyState === ws.OPEN) ws.send(message, { binary: false });
    });
  }

  sendAudio(frame: Buffer): void {
    if (!this.over && !this.moved) this.media.frame(frame);
  }

  listen(events: OperatorLegEvents): void {
    this.events = events;
    if (this.over) events.hungUp();
  }

  async hangUp(): Promise<void> {
    this.over = true;
    await this.rest.hangUp(this.credentials, this.callSid).catch((err: unknown) => this.log.warn({ err }, 'the operator\'s call could not be hung up'));
    if (this.ws.readyState === this.ws.OPEN) this.ws.close(1000, 'declined');
  }

  async join(): Promise<JoinedLegs> {
    if (this.over) throw new Error('the operator hung up before the join');
    this.moved = true;
    await this.joinBoth();
    // Twilio carries the two from here: the call is over on our side
    return { ended: Promise.resolve(), hangUp: async () => undefined };
  }

  heard(frame: Buffer): void {
    if (!this.over && !this.moved) this.events?.audio?.(frame);
  }

  key(digit: string): void {
    if (!this.over && !this.moved) this.events?.key(digit);
  }

  gone(): void {
    if (this.over || this.moved) return;
    this.over = true;
    this.events?.hungUp();
  }
}
