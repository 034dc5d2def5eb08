/**
 * Notification e-mails on Redis (BullMQ) built on their own: for tools and tests that have a URL
 * and no process around them. The runtime makes its e-mail queue from its `Queues` instead
 * (service.ts), on the process's Redis owner.
 */
import { createQueues } from '../queue/index.js';
import { RedisConnections } from '../redis.js';
import { NotificationEmailQueue, type EmailQueueOptions } from './email-queue.js';

export interface BullMqEmailQueueOptions extends EmailQueueOptions {
  redisUrl: string;
}

export class BullMqEmailQueue extends NotificationEmailQueue {
  private readonly redis: RedisConnections;

  constructor(options: BullMqEmailQueueOptions) {
    const redis = new RedisConnections(options.redisUrl, options.logger);
    super(createQueues({ redis }), options);
    this.redis = redis;
  }

  override async close(): Promise<void> {
    await super.close();
    await this.redis.close();
  }
}
