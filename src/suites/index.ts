/** The test suites' runner on a server's runtime: its providers, webhooks (for tools not answered by the test) and call path. */
import type { Logger } from 'pino';
import type { ChatStore } from '../chats/store.js';
import type { Runtime } from '../runtime.js';
import type { Store } from '../store/index.js';
import { SuiteRunner } from './runner.js';
import { voiceConversation } from './voice-test.js';

export function createSuiteRunner(o: { store: Store; runtime: Runtime; chats: ChatStore; logger: Logger }): SuiteRunner {
  return new SuiteRunner({
    store: o.store,
    providers: o.runtime.providers,
    webhooks: o.runtime.webhooks,
    chats: o.chats,
    logger: o.logger,
    voice: voiceConversation({ callLog: o.store.calls, logger: o.logger }),
    ...(o.runtime.keys ? { keys: o.runtime.keys } : {}),
  });
}
