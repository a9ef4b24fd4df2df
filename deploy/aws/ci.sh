#!/usr/bin/env bash
# The CDK app's checks, as CI runs them (.ci/run): from the lock file, with no AWS
# configuration at all. Type check, the jest suite over the synthesized templates, then
# `cdk synth` of every variant and cfn-lint over every template it writes.
set -euo pipefail
cd "$(dirname "$0")"
# No credentials, no profile, no region: synth must need none of them.
while IFS= read -r v; do unset "$v"; done < <(env | sed -n 's/^\(AWS_[A-Z_]*\)=.*/\1/p')
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null CDK_DISABLE_VERSION_CHECK=1
npm ci --no-audit --no-fund --loglevel=error
npx tsc --noEmit -p .
npx jest --silent
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The defaults (relay, room node); TGW with a user's URL; no multicast on Graviton;
# LoadLab shaped in a NAT instance's kernel.
# Synth's own chatter (the placeholder binary's warning) only when it fails.
synth() {
  local dir=$out/$1
  shift
  npx cdk synth --quiet --no-notices -o "$dir" "$@" >"$dir.log" 2>&1 || { cat "$dir.log" >&2; return 1; }
}
synth default
synth tgw -c multicast=tgw -c nodes=4 -c url=wss://app.example.com/rooms/demo -c shards=5 -c startAt=2026-12-01T09:30:00Z
synth none -c multicast=none -c nodes=2 -c instanceType=c7gn.xlarge
synth nat -c shaping=nat -c shards=4 -c link=20mbit/40ms
cfn-lint "$out"/*/*.template.json
echo "aws: $(ls "$out"/*/*.template.json | wc -l) templates synthesized offline, cfn-lint clean"
