/**
 * SIP's metrics: the counters of the signalling (requests, responses, parse errors, timeouts,
 * INVITEs refused by reason) and each call's RTP figures once it is over (loss, lateness, wrong
 * sources, jitter). The endpoint reports what happens through `count`; the dialogs report a
 * call's RTP through `callOver`; nothing else here decides anything.
 */
import { Counter, Histogram, type Registry } from 'prom-client';
import type { RtpStats } from './rtp.js';

export class SipMetrics {
  readonly requests: Counter<'method'>;
  readonly responses: Counter<'code'>;
  readonly parseErrors: Counter;
  readonly timeouts: Counter<'method'>;
  readonly refused: Counter<'reason'>;
  readonly rtpLost: Counter;
  readonly rtpLate: Counter;
  readonly rtpWrongSource: Counter;
  readonly jitter: Histogram;
  readonly lossRatio: Histogram;

  constructor(registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({ name: 'switchboard_sip_requests_total', help: 'SIP requests received (retransmissions not counted), by method.', labelNames: ['method'], registers });
    this.responses = new Counter({ name: 'switchboard_sip_responses_total', help: 'SIP responses received, by status code.', labelNames: ['code'], registers });
    this.parseErrors = new Counter({ name: 'switchboard_sip_parse_errors_total', help: 'SIP messages dropped because they did not parse.', registers });
    this.timeouts = new Counter({ name: 'switchboard_sip_transaction_timeouts_total', help: 'Our SIP requests that got no final response, by method.', labelNames: ['method'], registers });
    this.refused = new Counter({
      name: 'switchboard_sip_invites_refused_total',
      help: 'INVITEs refused before any answer, by reason (source, credentials, number, media, busy, rejected).',
      labelNames: ['reason'],
      registers,
    });
    this.rtpLost = new Counter({ name: 'switchboard_rtp_packets_lost_total', help: 'Caller RTP packets that never arrived (or too late to play).', registers });
    this.rtpLate = new Counter({ name: 'switchboard_rtp_packets_late_total', help: 'Caller RTP packets that arrived after their turn, or twice.', registers });
    this.rtpWrongSource = new Counter({ name: 'switchboard_rtp_wrong_source_total', help: "RTP packets dropped because they came from another address than the call's peer.", registers });
    this.jitter = new Histogram({
      name: 'switchboard_rtp_jitter_seconds',
      help: "Each SIP call's RTP interarrival jitter at its end (RFC 3550).",
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16],
      registers,
    });
    this.lossRatio = new Histogram({
      name: 'switchboard_rtp_loss_ratio',
      help: "Each SIP call's share of caller RTP packets lost.",
      buckets: [0, 0.001, 0.01, 0.02, 0.05, 0.1, 0.25, 1],
      registers,
    });
  }

  /** The endpoint's report of what happened: `parse_error`, `request:<METHOD>`, `response:<code>`, `timeout:<METHOD>`. */
  count(what: string): void {
    const [kind, value = ''] = what.split(':');
    if (kind === 'parse_error') this.parseErrors.inc();
    else if (kind === 'request') this.requests.inc({ method: value });
    else if (kind === 'response') this.responses.inc({ code: value });
    else if (kind === 'timeout') this.timeouts.inc({ method: value });
  }

  /** A call's RTP figures, counted once as its dialog goes. */
  callOver(s: RtpStats): void {
    this.rtpLost.inc(s.lost);
    this.rtpLate.inc(s.late);
    this.rtpWrongSource.inc(s.wrongSource);
    if (s.received > 0) {
      this.jitter.observe(s.jitterMs / 1000);
      this.lossRatio.observe(s.lost / (s.received + s.lost));
    }
  }
}
