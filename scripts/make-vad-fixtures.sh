#!/usr/bin/env bash
# Remakes the voice-activity fixtures of test/fixtures/vad/ (docs/turn-taking.md): speech from
# Debian's espeak-ng, noises from sox, each as 8 kHz mono mu-law WAV, the way a caller's audio
# reaches a call. What each one must do in a call is in test/fixtures/vad/manifest.json (kept by
# hand: this script makes only the audio). sox runs with -R (its fixed random seed) and espeak-ng
# is deterministic, so the same versions remake the same bytes.
#
#   scripts/make-vad-fixtures.sh            (needs espeak-ng and sox: apt-get install espeak-ng sox)
set -euo pipefail

out="$(cd "$(dirname "$0")/.." && pwd)/test/fixtures/vad"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

for tool in espeak-ng sox; do
  command -v "$tool" >/dev/null || { echo "make-vad-fixtures: $tool is not installed (apt-get install espeak-ng sox)" >&2; exit 1; }
done

# the RMS level of a file in dBFS
rms_db() { sox "$1" -n stats 2>&1 | awk '/^RMS lev dB/ { print $4 }'; }

# $1 name, then espeak-ng's options and text: speech at 16-bit, leading and trailing silence cut
# (the sound starts at the file's first sample), peak at -3 dBFS
speak() {
  local name="$1"
  shift
  espeak-ng "$@" -w "$tmp/$name.raw.wav"
  sox -R "$tmp/$name.raw.wav" -r 8000 -c 1 -b 16 "$tmp/$name.wav" \
    silence 1 0.02 0.5% reverse silence 1 0.02 0.5% reverse norm -3
}

# 16-bit 8 kHz in, mu-law 8 kHz out
mulaw() { sox -R "$1" -r 8000 -c 1 -e mu-law "$out/$2.wav"; }

speak speech-booking -v en-us -s 165 "I would like to book an appointment for Tuesday morning, please."
speak speech-short -v en-gb -s 170 -p 60 "Yes, that is right."
mulaw "$tmp/speech-booking.wav" speech-booking
mulaw "$tmp/speech-short.wav" speech-short

# a click: 100 ms of broadband noise, a sharp attack and a fast decay
sox -R -n -r 8000 -c 1 -b 16 "$tmp/click.wav" synth 0.1 whitenoise fade h 0.002 0.1 0.095 norm -6
mulaw "$tmp/click.wav" click-100ms

# a cough-like burst: 300 ms of noise shaped like a cough (an explosive onset, a throaty band, a decay)
sox -R -n -r 8000 -c 1 -b 16 "$tmp/cough.wav" synth 0.3 pinknoise \
  sinc 200-2500 fade q 0.008 0.3 0.24 overdrive 6 norm -4
mulaw "$tmp/cough.wav" cough-300ms

# pink noise at -30 dBFS RMS, 3 s (a fan, a car, a line's hiss)
sox -R -n -r 8000 -c 1 -b 16 "$tmp/pink-raw.wav" synth 3 pinknoise
sox -R "$tmp/pink-raw.wav" "$tmp/pink.wav" gain "$(awk -v l="$(rms_db "$tmp/pink-raw.wav")" 'BEGIN { print -30 - l }')"
mulaw "$tmp/pink.wav" pink-noise-30dbfs

# babble: four other voices talking at once, some way off (-28 dBFS RMS), 3 s
espeak-ng -v en-us -s 175 -p 35 -w "$tmp/b1.wav" "So I told him the meeting was moved to Thursday afternoon and he was not happy about it at all."
espeak-ng -v en-gb -s 150 -p 70 -w "$tmp/b2.wav" "Have you seen the new place on the corner? They have the best coffee in town, honestly."
espeak-ng -v en-us+f3 -s 190 -p 55 -w "$tmp/b3.wav" "We should leave before six if we want to get there before the traffic starts."
espeak-ng -v en-gb-x-rp -s 160 -p 45 -w "$tmp/b4.wav" "The children are at their grandmother's for the weekend, so the house is quiet."
for i in 1 2 3 4; do sox -R "$tmp/b$i.wav" -r 8000 -c 1 -b 16 "$tmp/b$i-8k.wav" trim 0 3; done
sox -R -m "$tmp/b1-8k.wav" "$tmp/b2-8k.wav" "$tmp/b3-8k.wav" "$tmp/b4-8k.wav" "$tmp/babble-raw.wav"
sox -R "$tmp/babble-raw.wav" "$tmp/babble.wav" gain "$(awk -v l="$(rms_db "$tmp/babble-raw.wav")" 'BEGIN { print -28 - l }')"
mulaw "$tmp/babble.wav" babble

# speech over noise: the booking sentence over pink noise at -30 dBFS, the noise from 500 ms before the speech
sox -R -n -r 8000 -c 1 -b 16 "$tmp/bed-raw.wav" synth 5 pinknoise
sox -R "$tmp/bed-raw.wav" "$tmp/bed.wav" gain "$(awk -v l="$(rms_db "$tmp/bed-raw.wav")" 'BEGIN { print -30 - l }')"
sox -R "$tmp/speech-booking.wav" "$tmp/speech-late.wav" pad 0.5 0
speech_end="$(sox --i -D "$tmp/speech-late.wav")"
sox -R -m -v 1 "$tmp/bed.wav" -v 1 "$tmp/speech-late.wav" "$tmp/over-noise.wav" trim 0 "$(awk -v d="$speech_end" 'BEGIN { print d + 0.5 }')"
mulaw "$tmp/over-noise.wav" speech-over-noise

for f in "$out"/*.wav; do
  printf '%-28s %6.3f s  RMS %6s dBFS\n' "$(basename "$f")" "$(sox --i -D "$f")" "$(rms_db "$f")"
done
