/**
 * The browser as a carrier (DECISIONS 14, docs/web-calls.md): no numbers and no account settings;
 * `POST /calls/web` makes the call, and its stream's WebSocket upgrade is this carrier's route.
 */
import { declareCarrier } from '../carrier.js';
import { upgradeRoute } from '../upgrades.js';
import { WEB_STREAM_PATH, WebTelephony } from './transport.js';
import type { SipTelephony } from '../sip/telephony.js';

export const carrier = declareCarrier({
  id: 'web',
  label: 'Web calls',
  create(ctx) {
    // a web call's warm transfer dials the operator through the account's SIP trunk, when SIP runs here
    const web = new WebTelephony({
      calls: ctx.calls,
      logger: ctx.logger,
      watcher: ctx.watcher,
      operators: { store: ctx.store, dialler: () => (ctx.instanceOf('sip') as SipTelephony | null)?.operators ?? null, liveness: ctx.liveness },
    });
    return {
      instance: web,
      routes: (app) => upgradeRoute(app, WEB_STREAM_PATH, (request, socket, head) => web.upgrade(request, socket, head)),
      close: () => web.close(),
    };
  },
});
