#!/bin/sh
# ASR-732 round trip: record a session, convert it, replay it as an ACP agent to a
# resuming client while recording that, convert the recording, compare the two streams.
# usage: examples/roundtrip/roundtrip.sh [WORKDIR]   (exit 0: equivalent, 1: differences)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# The acp-* tools on PATH (acp-pipes installed), else those of the checkout around here.
if command -v acp-tee >/dev/null 2>&1; then bin=; else bin=$here/../../bin/; fi
dir=${1:-$(mktemp -d)}
mkdir -p "$dir"
cd "$dir"
"${bin}acp-echo-agent" --client-session 3 --permission-every 2 > client.jsonl
"${bin}acp-tee" -o original.wire.jsonl -- "${bin}acp-echo-agent" < client.jsonl > /dev/null
"${bin}acp-asr" original.wire.jsonl > S.asr.jsonl
"${bin}acp-tee" -o replayed.wire.jsonl -- "${bin}acp-replay" --serve S.asr.jsonl \
    --report losses.json < "$here/resume-client.jsonl" > /dev/null
"${bin}acp-asr" replayed.wire.jsonl > S2.asr.jsonl
"${bin}acp-replay" --compare S.asr.jsonl S2.asr.jsonl
