/**
 * TurnClock alone, on an injected clock: which mark lands on which turn, when a turn begins, is
 * dropped or closes, and what it reports (the split of latency.ts, the pacer's stats).
 */
import { beforeEach, describe, expect, it } from 'vitest';
import type { TurnLatency } from '../../src/calls/latency.js';
import type { PacerStats } from '../../src/calls/outbound.js';
import { TurnClock } from '../../src/calls/turn-clock.js';

let t = 0;
let reported: TurnLatency[] = [];
let stats: PacerStats = { framesSent: 0, framesLate: 0, maxLateMs: 0 };

function turnClock(listening = true): TurnClock {
  return new TurnClock({
    callId: 'call-1',
    ...(listening ? { onTurnLatency: (l: TurnLatency) => reported.push(l) } : {}),
    outbound: () => stats,
    now: () => t,
  });
}

beforeEach(() => {
  t = 1_000;
  reported = [];
  stats = { framesSent: 0, framesLate: 0, maxLateMs: 0 };
});

describe('a pipeline turn', () => {
  it('marks each step once, closes on the first frame after the audio started, and reports the split', () => {
    const clock = turnClock();
    clock.begin('greeting');
    t = 1_010;
    const turn = clock.modelRequested();
    expect(turn).not.toBeNull();
    t = 1_200;
    clock.firstToken(turn);
    t = 1_250;
    clock.firstToken(turn); // later tokens change nothing
    clock.modelReady(turn);
    t = 1_260;
    const tts = clock.ttsRequested();
    clock.modelReady(turn);
    t = 1_500;
    clock.ttsFirstAudio(tts);
    t = 1_520;
    clock.ttsFirstAudio(tts);
    clock.audioStarted();
    t = 1_530;
    stats = { framesSent: 40, framesLate: 1, maxLateMs: 25 };
    clock.frameSent();

    expect(reported).toEqual([
      {
        callId: 'call-1',
        nodeId: 'greeting',
        speechEndedAt: null,
        transcribedAt: null,
        endOfTurnAt: 1_000,
        modelRequestedAt: 1_010,
        firstTokenAt: 1_200,
        modelReadyAt: 1_250,
        ttsRequestedAt: 1_260,
        ttsFirstAudioAt: 1_500,
        firstFrameAt: 1_530,
        totalMs: 530,
        modelFirstTokenMs: 190,
        modelWaitMs: 240,
        ttsWaitMs: 240,
        providerWaitMs: 480,
        serviceMs: 50,
        outbound: { framesSent: 40, framesLate: 1, maxLateMs: 25 },
      },
    ]);
    // the report is a copy of the stats as they were
    stats.framesSent = 99;
    expect(reported[0]!.outbound.framesSent).toBe(40);
    expect(clock.pending).toBeNull();
  });

  it('frames before the reply\'s audio started leave the turn open; frames after it closes report nothing more', () => {
    const clock = turnClock();
    clock.begin('n');
    clock.frameSent(); // the end of an earlier line still playing
    expect(clock.pending).not.toBeNull();
    expect(reported).toHaveLength(0);
    clock.audioStarted();
    t = 1_100;
    clock.frameSent();
    clock.frameSent();
    expect(reported).toHaveLength(1);
    expect(reported[0]).toMatchObject({ firstFrameAt: 1_100, totalMs: 100, modelRequestedAt: null, ttsRequestedAt: null, providerWaitMs: 0, serviceMs: 100 });
  });

  it('only the turn\'s first model request and first TTS request are its own; later ones mark nothing', () => {
    const clock = turnClock();
    clock.begin('n');
    const first = clock.modelRequested();
    t = 1_050;
    const second = clock.modelRequested();
    expect(second).toBeNull();
    clock.firstToken(second);
    clock.modelReady(second);
    expect(clock.pending).toMatchObject({ modelRequestedAt: 1_000, firstTokenAt: null, modelReadyAt: null });
    clock.firstToken(first);
    expect(clock.pending?.firstTokenAt).toBe(1_050);

    const tts = clock.ttsRequested();
    t = 1_060;
    expect(clock.ttsRequested()).toBeNull();
    clock.ttsFirstAudio(null);
    expect(clock.pending).toMatchObject({ ttsRequestedAt: 1_050, ttsFirstAudioAt: null });
    clock.ttsFirstAudio(tts);
    expect(clock.pending?.ttsFirstAudioAt).toBe(1_060);
  });

  it('a model run or TTS session started for a turn marks no newer turn, nor one after its close', () => {
    const clock = turnClock();
    clock.begin('first');
    const oldRun = clock.modelRequested();
    const oldTts = clock.ttsRequested();
    t = 1_300;
    clock.begin('second'); // the caller spoke again: this turn replaces the first
    t = 1_400;
    clock.firstToken(oldRun);
    clock.modelReady(oldRun);
    clock.ttsFirstAudio(oldTts);
    expect(clock.pending).toMatchObject({ nodeId: 'second', endOfTurnAt: 1_300, modelRequestedAt: null, firstTokenAt: null, modelReadyAt: null, ttsRequestedAt: null, ttsFirstAudioAt: null });

    const run = clock.modelRequested();
    clock.audioStarted();
    clock.frameSent();
    const closed = reported[0]!;
    clock.begin('third');
    clock.firstToken(run); // the closed turn's run, still streaming
    expect(clock.pending?.firstTokenAt).toBeNull();
    expect(reported).toEqual([closed]);
  });

  it('no model request without a caller turn (a node entered, a tool result)', () => {
    const clock = turnClock();
    expect(clock.modelRequested()).toBeNull();
    expect(clock.ttsRequested()).toBeNull();
    clock.firstToken();
    clock.audioStarted();
    clock.frameSent();
    expect(clock.pending).toBeNull();
    expect(reported).toEqual([]);
  });
});

describe('a realtime turn', () => {
  it('server VAD asks the model at the end of the turn; the VAD reply\'s first event and first audio mark the pending turn', () => {
    const clock = turnClock();
    clock.begin('assistant', 2_000);
    clock.modelRequested(2_000);
    t = 2_150;
    clock.firstToken();
    t = 2_180;
    clock.modelReady();
    clock.audioStarted();
    t = 2_200;
    clock.modelReady(); // the next audio delta
    clock.audioStarted();
    t = 2_201;
    clock.frameSent();
    expect(reported).toHaveLength(1);
    expect(reported[0]).toMatchObject({
      nodeId: 'assistant',
      endOfTurnAt: 2_000,
      modelRequestedAt: 2_000,
      firstTokenAt: 2_150,
      modelReadyAt: 2_180,
      ttsRequestedAt: null,
      ttsFirstAudioAt: null,
      firstFrameAt: 2_201,
      totalMs: 201,
      modelFirstTokenMs: 150,
      modelWaitMs: 180,
      ttsWaitMs: 0,
      providerWaitMs: 180,
      serviceMs: 21,
    });
  });

  it('the caller speaking again drops the turn: nothing is reported for it', () => {
    const clock = turnClock();
    clock.begin('assistant');
    clock.modelRequested();
    clock.firstToken();
    clock.cancel();
    clock.modelReady();
    clock.audioStarted();
    clock.frameSent();
    expect(clock.pending).toBeNull();
    expect(reported).toEqual([]);
  });
});

describe('with nobody listening', () => {
  it('keeps no turn, marks nothing and does not time the TTS', () => {
    const clock = turnClock(false);
    expect(clock.reporting).toBe(false);
    clock.begin('n');
    expect(clock.pending).toBeNull();
    expect(clock.modelRequested()).toBeNull();
    expect(clock.ttsRequested()).toBeNull();
    clock.audioStarted();
    clock.frameSent();
    expect(reported).toEqual([]);
  });

  it('reads performance.now() when no clock is given', () => {
    const clock = new TurnClock({ callId: 'c', onTurnLatency: (l) => reported.push(l), outbound: () => stats });
    const before = performance.now();
    clock.begin('n');
    const after = performance.now();
    expect(clock.pending!.endOfTurnAt).toBeGreaterThanOrEqual(before);
    expect(clock.pending!.endOfTurnAt).toBeLessThanOrEqual(after);
  });
});
