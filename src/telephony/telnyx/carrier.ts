/**
 * Telnyx as a carrier (DECISIONS 18, docs/telnyx.md): numbers with `provider: "telnyx"`, the
 * account's `telnyx` settings (API key, public key, connection), `TELNYX_API_BASE`, the Call
 * Control webhook and media stream (./routes.ts), and calls dialled, hung up and transferred over
 * the Call Control API (./api.ts).
 */
import { declareCarrier } from '../carrier.js';
import { createTelnyxApi } from './api.js';
import { telnyxRoutes } from './routes.js';
import { telnyxAccount } from './settings.js';
import { TelnyxTelephony } from './telephony.js';

export const carrier = declareCarrier({
  id: 'telnyx',
  label: 'Telnyx',
  numbers: 'Telnyx Call Control (DECISIONS 18)',
  apiBase: 'https://api.telnyx.com',
  account: telnyxAccount,
  create(ctx) {
    const telnyx = new TelnyxTelephony({
      calls: ctx.calls,
      callStore: ctx.callStore,
      store: ctx.store,
      api: createTelnyxApi(ctx.apiBase),
      logger: ctx.logger,
      publicUrl: ctx.publicUrl,
      watcher: ctx.watcher,
      onUnavailable: ctx.onUnavailable,
    });
    return {
      instance: telnyx,
      routes: (app) => telnyxRoutes(app, { telnyx }),
      outbound: telnyx,
      wire: (outbound) => {
        telnyx.outbound = outbound;
      },
    };
  },
});
