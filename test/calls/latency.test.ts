/** The per-turn latency split (service share vs provider wait) and its recorder. */
import { describe, expect, it } from 'vitest';
import { splitTurnLatency, type TurnLatency, type TurnMarks } from '../../src/calls/latency.js';
import { percentiles, TurnLatencyRecorder } from '../../src/calls/latency-recorder.js';

const marks = (m: Partial<TurnMarks>): TurnMarks => ({
  endOfTurnAt: 1000,
  modelRequestedAt: null,
  firstTokenAt: null,
  modelReadyAt: null,
  ttsRequestedAt: null,
  ttsFirstAudioAt: null,
  firstFrameAt: 1000,
  ...m,
});

describe('splitTurnLatency', () => {
  it('a streamed reply: service share is the turn minus the model and TTS waits', () => {
    const split = splitTurnLatency(
      marks({ modelRequestedAt: 1001, firstTokenAt: 1300, modelReadyAt: 1350, ttsRequestedAt: 1352, ttsFirstAudioAt: 1502, firstFrameAt: 1505 }),
    );
    expect(split).toEqual({ totalMs: 505, modelFirstTokenMs: 299, modelWaitMs: 349, ttsWaitMs: 150, providerWaitMs: 499, serviceMs: 6 });
  });

  it('counts overlapping waits once and clips them to the turn', () => {
    const split = splitTurnLatency(
      marks({ modelRequestedAt: 990, modelReadyAt: 1100, ttsRequestedAt: 1050, ttsFirstAudioAt: 1200, firstFrameAt: 1150 }),
    );
    // model 1000..1100, TTS 1050..1150 (clipped at the first frame): 150 ms of waiting in all
    expect(split).toMatchObject({ totalMs: 150, modelWaitMs: 100, ttsWaitMs: 100, providerWaitMs: 150, serviceMs: 0 });
  });

  it('a turn with no provider (say only, or marks missing) is all service', () => {
    expect(splitTurnLatency(marks({ ttsRequestedAt: 1002, firstFrameAt: 1004 }))).toMatchObject({
      totalMs: 4,
      providerWaitMs: 0,
      serviceMs: 4,
      modelFirstTokenMs: null,
    });
  });
});

describe('TurnLatencyRecorder', () => {
  const turn = (callId: string, serviceMs: number, late: number): TurnLatency => ({
    ...marks({}),
    callId,
    nodeId: 'n',
    totalMs: serviceMs + 10,
    modelFirstTokenMs: null,
    modelWaitMs: 5,
    ttsWaitMs: 5,
    providerWaitMs: 10,
    serviceMs,
    outbound: { framesSent: 100, framesLate: late, maxLateMs: late ? 30 : 0 },
  });

  it('nearest-rank percentiles', () => {
    const values = Array.from({ length: 1000 }, (_, i) => i + 1);
    expect(percentiles(values)).toMatchObject({ count: 1000, p50: 500, p95: 950, p99: 990, max: 1000 });
    expect(percentiles([])).toMatchObject({ count: 0, p99: 0 });
  });

  it('summarizes turns, keeps each call\'s latest audio figures, and diffs them from a snapshot', () => {
    const r = new TurnLatencyRecorder();
    r.record(turn('a', 1, 0));
    r.record(turn('b', 3, 1));
    const snapshot = r.outboundSnapshot();
    r.record(turn('a', 2, 2));
    expect(r.turns).toBe(3);
    expect(r.summary().serviceMs).toMatchObject({ count: 3, p50: 2, max: 3 });
    expect(r.summary().modelFirstTokenMs.count).toBe(0);
    expect(r.outboundTotals()).toEqual({ calls: 2, framesSent: 200, framesLate: 3, maxLateMs: 30 });
    expect(r.outboundTotals(snapshot)).toMatchObject({ framesSent: 0, framesLate: 2 });
    r.resetTurns();
    expect(r.turns).toBe(0);
    expect(r.outboundTotals().framesLate).toBe(3);
  });
});
