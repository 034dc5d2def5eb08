/**
 * The delivery queue on Redis (BullMQ) built on its own: for tools and tests that have a URL and
 * no process around them. The runtime makes its delivery queue from its `Queues` instead
 * (service.ts), on the process's Redis owner. How groups keep calls in order: src/queue/bullmq.ts.
 */
import { createQueues } from '../queue/index.js';
import { RedisConnections } from '../redis.js';
import { NotificationQueue, type DeliveryQueueOptions } from './queue.js';

export interface BullMqDeliveryQueueOptions extends DeliveryQueueOptions {
  redisUrl: string;
}

export class BullMqDeliveryQueue extends NotificationQueue {
  private readonly redis: RedisConnections;

  constructor(options: BullMqDeliveryQueueOptions) {
    const redis = new RedisConnections(options.redisUrl, options.logger);
    super(createQueues({ redis }), options);
    this.redis = redis;
  }

  override async close(): Promise<void> {
    await super.close();
    await this.redis.close();
  }
}
