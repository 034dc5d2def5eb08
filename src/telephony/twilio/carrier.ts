/**
 * Twilio as a carrier (docs/carriers.md): numbers with `provider: "twilio"` (the default), the
 * account's `telephony.twilio` credentials, `TWILIO_API_BASE`, the voice webhook, outbound
 * callbacks and Media Streams socket (./routes.ts), and calls placed and ended over its REST API.
 */
import { declareCarrier } from '../carrier.js';
import { createTwilioRest } from './rest.js';
import { twilioRoutes } from './routes.js';
import { twilioAccount } from './settings.js';
import { TwilioTelephony } from './transport.js';

export const carrier = declareCarrier({
  id: 'twilio',
  label: 'Twilio',
  numbers: 'Twilio Media Streams',
  apiBase: 'https://api.twilio.com',
  account: twilioAccount,
  create(ctx) {
    const twilio = new TwilioTelephony({
      calls: ctx.calls,
      callStore: ctx.callStore,
      store: ctx.store,
      rest: ctx.options.twilioRest ?? createTwilioRest(ctx.apiBase),
      logger: ctx.logger,
      publicUrl: ctx.publicUrl,
      watcher: ctx.watcher,
      onUnavailable: ctx.onUnavailable,
    });
    return {
      instance: twilio,
      routes: (app) => twilioRoutes(app, { twilio, publicUrl: ctx.publicUrl }),
      outbound: twilio,
      wire: (outbound) => {
        twilio.outbound = outbound;
      },
    };
  },
});
