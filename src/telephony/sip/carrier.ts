/**
 * Direct SIP as a carrier (DECISIONS 15, docs/sip.md): numbers with `provider: "sip"`, the
 * account's `sip` trunk settings, and our own user agent on `SIP_PORT` (no HTTP routes). Off
 * unless the runtime is asked to start it (`RuntimeOptions.sip`; `main` does from SIP_PORT):
 * then its numbers cannot call out, and say why.
 */
import { declareCarrier } from '../carrier.js';
import { defaultSipAddress, sipPublicAddress } from './addresses.js';
import { sipAccount } from './settings.js';
import { SipTelephony } from './telephony.js';

export const carrier = declareCarrier({
  id: 'sip',
  label: 'SIP',
  numbers: 'a SIP trunk (DECISIONS 15)',
  account: sipAccount,
  off: {
    unusable: 'SIP is off on this server (SIP_PORT=0): set SIP_PORT to place calls from sip numbers',
    place: 'SIP is off on this server',
  },
  async create(ctx) {
    const port = ctx.options.sip;
    if (!port) return null;
    const config = ctx.config;
    const publicAddress = await sipPublicAddress(config.SIP_PUBLIC_ADDRESS ?? defaultSipAddress(config.HOST, ctx.logger));
    const sip = new SipTelephony({
      calls: ctx.calls,
      store: ctx.store,
      logger: ctx.logger,
      watcher: ctx.watcher,
      liveness: ctx.liveness,
      registry: ctx.metrics.registry,
      host: config.HOST,
      port: port.port,
      ...(publicAddress ? { publicAddress } : {}),
      rtpPortMin: config.RTP_PORT_MIN,
      rtpPortMax: config.RTP_PORT_MAX,
      ...(port.timers ? { timers: port.timers } : {}),
      onUnavailable: ctx.onUnavailable,
    });
    try {
      await sip.start();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EADDRINUSE' && port.offWhenInUse) {
        // a softphone or a PBX on this machine holds the default port: the server starts without SIP
        await sip.close().catch(() => undefined);
        ctx.logger.warn(
          { port: port.port },
          `SIP is off: port ${port.port} is in use (UDP or TCP) by another program; set SIP_PORT to a free port to take SIP calls, or SIP_PORT=0 to turn SIP off`,
        );
        return null;
      }
      throw new Error(
        code === 'EADDRINUSE'
          ? `SIP_PORT ${port.port} is in use (UDP or TCP): set SIP_PORT to a free port, or 0 to turn SIP off`
          : `the SIP endpoint could not start on ${config.HOST}:${port.port}: ${(err as Error).message}`,
      );
    }
    return {
      instance: sip,
      outbound: sip,
      wire: (outbound) => {
        sip.outbound = outbound;
      },
      close: () => sip.close(),
    };
  },
});
