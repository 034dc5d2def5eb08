/**
 * The carriers one process runs, made from the declarations (./registry.ts): their routes on the
 * app, the outbound carriers a number's `provider` dials through, the wiring of outbound calls,
 * and their close.
 */
import type { FastifyInstance } from 'fastify';
import type { OutboundCalls, OutboundCarrier } from '../calls/outbound-calls.js';
import type { AnyCarrierDeclaration, CarrierContext, CarrierDeclaration, RunningCarrier } from './carrier.js';
import { carrierApiBaseVariable } from './carrier.js';
import { CARRIERS } from './registry.js';

/** What places a number's calls when its carrier does not run in this process: nothing, and it says why. */
function offCarrier(declaration: AnyCarrierDeclaration): OutboundCarrier {
  const off = declaration.off ?? { unusable: `${declaration.label} is off on this server`, place: `${declaration.label} is off on this server` };
  return {
    kind: declaration.id,
    unusable: () => off.unusable,
    place: () => Promise.reject(new Error(off.place)),
    cancel: () => Promise.resolve(),
  };
}

export class Carriers {
  private constructor(
    private readonly declarations: readonly AnyCarrierDeclaration[],
    private readonly running: Map<string, RunningCarrier>,
  ) {}

  /**
   * Starts every declared carrier, in order, each on its own context (`<CARRIER>_API_BASE` read
   * for it). One that fails to start closes the ones already started, then throws.
   */
  static async start(context: Omit<CarrierContext, 'apiBase' | 'onUnavailable' | 'instanceOf'> & { onUnavailable(carrier: string): void }, declarations: readonly AnyCarrierDeclaration[] = CARRIERS): Promise<Carriers> {
    const running = new Map<string, RunningCarrier>();
    const carriers = new Carriers(declarations, running);
    for (const d of declarations) {
      const configured = (context.config as unknown as Record<string, string | undefined>)[carrierApiBaseVariable(d.id)];
      try {
        const started = await d.create({ ...context, apiBase: d.apiBase === undefined ? '' : (configured ?? d.apiBase), onUnavailable: () => context.onUnavailable(d.id), instanceOf: (id) => running.get(id)?.instance ?? null });
        if (started) running.set(d.id, started);
      } catch (err) {
        await carriers.close();
        throw err;
      }
    }
    return carriers;
  }

  /** The carrier's own object (`TwilioTelephony`, …) when it runs here. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  instance<T>(declaration: CarrierDeclaration<T, any>): T | null {
    return (this.running.get(declaration.id)?.instance as T | undefined) ?? null;
  }

  /** The carrier by id, when it runs here. */
  get(id: string): RunningCarrier | undefined {
    return this.running.get(id);
  }

  /** The outbound carrier of every number `provider`: the running one's, else one that says it is off. */
  outbound(): Record<string, OutboundCarrier> {
    const out: Record<string, OutboundCarrier> = {};
    for (const d of this.declarations) {
      if (d.numbers === undefined) continue;
      out[d.id] = this.running.get(d.id)?.outbound ?? offCarrier(d);
    }
    return out;
  }

  /** Outbound calls are made: each carrier gets them (its callbacks end calls there). */
  wire(outbound: OutboundCalls): void {
    for (const c of this.running.values()) c.wire?.(outbound);
  }

  /** Every carrier's routes on the app. */
  async routes(app: FastifyInstance): Promise<void> {
    for (const c of this.running.values()) await c.routes?.(app);
  }

  /** Closes every carrier (after the live calls have ended), each once. */
  async close(): Promise<void> {
    const running = [...this.running.values()];
    this.running.clear();
    for (const c of running) await c.close?.();
  }
}
