/** The `tool-calls` exchange of a call, each exchange a `tool` span under the turn under way (tracing on). */
import type { ToolCaller } from '../calls/backend.js';
import type { CallObserver } from './call-observer.js';
import { endSpan, startSpan, tracingEnabled } from './tracing.js';

export function tracedToolCalls(callTools: ToolCaller, observer: CallObserver): ToolCaller {
  return async (calls, options) => {
    if (!tracingEnabled()) return callTools(calls, options);
    const span = startSpan('tool', observer.parent(), {
      'switchboard.tool.names': calls.map((c) => c.name).join(','),
      'switchboard.tool.async': options.async === true,
      ...(options.nodeId ? { 'switchboard.node.id': options.nodeId } : {}),
    });
    try {
      const outcomes = await callTools(calls, options);
      const failed = outcomes.filter((o) => 'error' in o);
      endSpan(span, { 'switchboard.tool.failed': failed.length }, failed.length > 0 ? String((failed[0] as { error: unknown }).error) : undefined);
      return outcomes;
    } catch (err) {
      endSpan(span, {}, (err as Error).message);
      throw err;
    }
  };
}
