/** The SIP carrier's own errors (`docs/errors.md`). */
import { ErrorCodes, SwitchboardError } from '../../errors.js';

/** The far end refused a REFER: the call ends `pipeline-error-sip`, as a refused Twilio transfer ends `pipeline-error-twilio`. */
export class SipTransferError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.SIP_TRANSFER_REFUSED] as const;
  override name = 'SipTransferError';
  /** The carrier, for `ended_reason` `pipeline-error-sip`. */
  readonly provider = 'sip';
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(ErrorCodes.SIP_TRANSFER_REFUSED, message);
  }
}
