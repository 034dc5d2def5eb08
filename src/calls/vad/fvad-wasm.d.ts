/** The parts of `@echogarden/fvad-wasm` (libfvad, WebRTC's VAD, built with Emscripten) that ./webrtc.ts uses. */
declare module '@echogarden/fvad-wasm' {
  export interface FvadModule {
    _fvad_new(): number;
    _fvad_free(instance: number): void;
    /** 0 (quality) to 3 (very aggressive); 0 on success. */
    _fvad_set_mode(instance: number, mode: number): number;
    /** 8000, 16000, 32000 or 48000; 0 on success. */
    _fvad_set_sample_rate(instance: number, rate: number): number;
    /** 1 speech, 0 not, -1 a bad frame length (10, 20 or 30 ms). */
    _fvad_process(instance: number, samples: number, length: number): number;
    _malloc(bytes: number): number;
    _free(pointer: number): void;
    /** The WASM memory as 16-bit samples (a new view after the memory grows: read it each time). */
    HEAP16: Int16Array;
  }
  const createFvad: (options?: Record<string, unknown>) => Promise<FvadModule>;
  export default createFvad;
}
