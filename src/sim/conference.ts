/**
 * The Twilio stand-in's conferences (`<Dial><Conference>name</Conference></Dial>`, as a warm
 * transfer's join uses them): a call that runs the verb enters the conference of that name (made
 * on the first entry) and stays until the conference ends, or it leaves (hung up, redirected); a
 * participant with `endConferenceOnExit="true"` ends it for everyone as it leaves, and their
 * `<Dial>` is then over (their TwiML goes on after it). Who was in it and when is kept. The
 * participants' audio is not mixed: the stand-in keeps the conference's membership and its
 * timeline, not its sound.
 */

export interface ConferenceParticipant {
  callSid: string;
  to: string;
  from: string;
  direction: 'outbound-api' | 'inbound';
  endConferenceOnExit: boolean;
  joinedAt: number;
  leftAt: number | null;
}

export interface StandInConference {
  name: string;
  /** Everyone who entered, in order. */
  participants: ConferenceParticipant[];
  startedAt: number;
  endedAt: number | null;
}

export class Conferences {
  /** Every conference, by name (a name used again after its conference ended starts a new one). */
  readonly all = new Map<string, StandInConference>();
  private readonly waiting = new Map<StandInConference, Set<() => void>>();

  get(name: string): StandInConference | undefined {
    return this.all.get(name);
  }

  /** Enters `name`; resolves once the conference ended or the call left it (`signal`). */
  enter(
    name: string,
    call: { sid: string; to: string; from: string; direction: 'outbound-api' | 'inbound' },
    endConferenceOnExit: boolean,
    signal: AbortSignal,
  ): Promise<void> {
    let conference = this.all.get(name);
    if (!conference || conference.endedAt !== null) {
      conference = { name, participants: [], startedAt: Date.now(), endedAt: null };
      this.all.set(name, conference);
      this.waiting.set(conference, new Set());
    }
    const c = conference;
    const me: ConferenceParticipant = { callSid: call.sid, to: call.to, from: call.from, direction: call.direction, endConferenceOnExit, joinedAt: Date.now(), leftAt: null };
    c.participants.push(me);
    return new Promise<void>((resolve) => {
      const done = () => {
        this.waiting.get(c)?.delete(done);
        me.leftAt ??= Date.now();
        resolve();
      };
      this.waiting.get(c)!.add(done);
      const leave = () => {
        done();
        if (endConferenceOnExit) this.end(c);
      };
      if (signal.aborted) leave();
      else signal.addEventListener('abort', leave, { once: true });
    });
  }

  private end(c: StandInConference): void {
    if (c.endedAt !== null) return;
    c.endedAt = Date.now();
    for (const done of [...(this.waiting.get(c) ?? [])]) done();
    this.waiting.delete(c);
  }
}
