/**
 * One call never harms another: callbacks that the event loop runs for a call (a provider's
 * socket, a timer, the pacer) and work it starts without waiting are wrapped so that what they
 * throw or reject ends that call (`onDefect`), never reaches the process.
 */

/** `callbacks` with each function wrapped: a throw goes to `onDefect(err, "<where>.<name>")`. */
export function shielded<T extends object>(callbacks: T, where: string, onDefect: (err: unknown, where: string) => void): T {
  const out: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(callbacks)) {
    out[name] =
      typeof fn === 'function'
        ? (...args: unknown[]) => {
            try {
              return (fn as (...a: unknown[]) => unknown)(...args);
            } catch (err) {
              onDefect(err, `${where}.${name}`);
              return undefined;
            }
          }
        : fn;
  }
  return out as T;
}
