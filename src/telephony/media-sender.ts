/**
 * Outbound audio to a carrier's media stream, several 20 ms frames to a message: frames are held
 * until a message of `framesPerMessage` is whole, then made into the carrier's own message and
 * sent (docs/transports.md, "Frames to a message"). Twilio and Telnyx differ only in the message.
 */
import { FRAME_BYTES } from '../calls/outbound.js';

export interface MediaSender {
  /** A 20 ms frame: held until the message is whole, then sent (a frame too long to hold goes alone). */
  frame(frame: Buffer): void;
  /** Sends the frames held, if any, as a shorter message. */
  flush(): void;
  /** Forgets the frames held (a `clear` drops them with what the far end buffered). */
  drop(): void;
}

export function batchedMediaSender(framesPerMessage: number, toMessage: (audio: Buffer) => Buffer, send: (message: Buffer) => void): MediaSender {
  const held = Buffer.allocUnsafe(Math.max(1, framesPerMessage) * FRAME_BYTES);
  let heldBytes = 0;
  const flush = () => {
    if (heldBytes === 0) return;
    const bytes = heldBytes;
    heldBytes = 0;
    send(toMessage(held.subarray(0, bytes)));
  };
  return {
    frame(frame) {
      if (heldBytes + frame.length > held.length) flush();
      if (frame.length > held.length) return send(toMessage(frame));
      frame.copy(held, heldBytes);
      heldBytes += frame.length;
      if (heldBytes === held.length) flush();
    },
    flush,
    drop() {
      heldBytes = 0;
    },
  };
}
