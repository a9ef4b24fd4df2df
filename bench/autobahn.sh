#!/usr/bin/env bash
# The load client's WebSocket against the Autobahn test suite (autobahntestsuite's fuzzing
# server, `wstest -m fuzzingserver`): the client connects for each case and echoes every
# text and binary message back, through the same engine, socket and readiness driving as
# `wirebench load` (the ignored test load::client::ws::tests::autobahn_fuzzing_server_echo);
# the suite judges each case (framing, fragments, control frames, UTF-8, the close
# handshake) and this script prints its verdicts. Not CI: it needs Python 2.7.
#
#   bench/autobahn.sh                          # AB_PY names Python 2.7 (default python2.7)
#   AB_PY="env PYENV_VERSION=2.7.18 python2.7" bench/autobahn.sh
#
# Installs autobahntestsuite into target/autobahn/py on its first run (pip, from PyPI).
# Left out: 12.* and 13.* (permessage-deflate, which the client does not offer) and the
# cases whose messages are larger than the client's message cap of 1 MiB (9.1.4-6, 9.2.4-6,
# 9.3.*, 9.4.*: 4 to 16 MiB). Exits 1 if any case FAILED.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mkdir -p target/autobahn && cd target/autobahn && pwd)
PORT=${PORT:-9001}
read -r -a PY <<< "${AB_PY:-python2.7}"
if ! PYTHONPATH="$OUT/py" "${PY[@]}" -c "import autobahntestsuite" 2> /dev/null; then
    "${PY[@]}" -m pip install -q --target "$OUT/py" autobahntestsuite
    touch "$OUT/py/zope/__init__.py" # --target skips the namespace package's .pth file
fi
rm -rf "$OUT/reports"
cat > "$OUT/fuzzingserver.json" << JSON
{"url": "ws://127.0.0.1:$PORT", "outdir": "$OUT/reports/clients", "cases": ["*"],
 "exclude-cases": ["9.1.4", "9.1.5", "9.1.6", "9.2.4", "9.2.5", "9.2.6", "9.3.*", "9.4.*", "12.*", "13.*"],
 "exclude-agent-cases": {}}
JSON
(cd "$OUT" && exec env PYTHONPATH="$OUT/py" "${PY[@]}" "$OUT/py/bin/wstest" -m fuzzingserver -s fuzzingserver.json) \
    > "$OUT/wstest.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2> /dev/null || true' EXIT
for _ in $(seq 200); do # wait for the port (bounded), not a fixed time
    (exec 3<> "/dev/tcp/127.0.0.1/$PORT") 2> /dev/null && break
    sleep 0.05
done
AUTOBAHN_URL="ws://127.0.0.1:$PORT" cargo test -q --release -p wirebench --lib autobahn_fuzzing_server_echo \
    -- --ignored > "$OUT/client.log" 2>&1 || { cat "$OUT/client.log"; exit 1; }
kill $SERVER 2> /dev/null || true
trap - EXIT

python3 - "$OUT/reports/clients/index.json" << 'PY'
import collections, json, sys
cases = json.load(open(sys.argv[1]))["wirebench-load"]
by = collections.Counter(c["behavior"] for c in cases.values())
close = collections.Counter(c["behaviorClose"] for c in cases.values())
print(f"Autobahn fuzzing server, {len(cases)} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items())))
print("close handshake: " + ", ".join(f"{k} {v}" for k, v in sorted(close.items())))
key = lambda c: [int(x) for x in c.split(".")]
for name in sorted(cases, key=key):
    c = cases[name]
    if c["behavior"] not in ("OK", "INFORMATIONAL") or c["behaviorClose"] not in ("OK", "INFORMATIONAL"):
        print(f"  {name}: {c['behavior']} (close {c['behaviorClose']})")
sys.exit(1 if by.get("FAILED") or close.get("FAILED") else 0)
PY
