/** The repositories over one database. */
import type { Db } from './db.js';
import { AccountRepository } from './account.js';
import { AssistantRepository } from './assistants.js';
import { CallLogRepository } from './calls.js';
import { EmailAttemptRepository } from './email-attempts.js';
import { KeyRepository } from './keys.js';
import { NumberRepository } from './numbers.js';
import { OutboundQueueRepository } from './outbound-queue.js';
import { WorkflowRepository } from './workflows.js';
import { TestSuiteRepository } from '../suites/store.js';

export interface Store {
  db: Db;
  keys: KeyRepository;
  workflows: WorkflowRepository;
  assistants: AssistantRepository;
  numbers: NumberRepository;
  account: AccountRepository;
  /** The call log: every call, kept CALL_RETENTION_DAYS. */
  calls: CallLogRepository;
  /** Outbound calls waiting to be dialled (the in-process dialer; BullMQ's are in Redis). */
  outboundQueue: OutboundQueueRepository;
  /** Attempts at notification e-mails (GET /calls/{id}/emails). */
  emailAttempts: EmailAttemptRepository;
  /** Test suites and their runs (DECISIONS 20). */
  testSuites: TestSuiteRepository;
}

export function createStore(db: Db): Store {
  return {
    db,
    keys: new KeyRepository(db),
    workflows: new WorkflowRepository(db),
    assistants: new AssistantRepository(db),
    numbers: new NumberRepository(db),
    account: new AccountRepository(db),
    calls: new CallLogRepository(db),
    outboundQueue: new OutboundQueueRepository(db),
    emailAttempts: new EmailAttemptRepository(db),
    testSuites: new TestSuiteRepository(db),
  };
}
