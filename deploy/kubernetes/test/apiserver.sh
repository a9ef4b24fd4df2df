#!/usr/bin/env bash
# A real Kubernetes control plane for the mesh tests: etcd + kube-apiserver on 127.0.0.1,
# built from source through the Go module proxy (no container images, no kubelet).
#
#   apiserver.sh build          build bin/{etcd,kube-apiserver} if missing (cold: minutes), fetch the CRDs
#   apiserver.sh start          build if needed, start, print the kubeconfig path (last line)
#   apiserver.sh stop           stop this instance (by the PIDs it recorded)
#   apiserver.sh crds           copy prometheus-operator's PodMonitor CRD into $BASE/crds
#
# Knobs (environment):
#   K8S_VERSION=v1.34.4 ETCD_VERSION=v3.6.16 PROM_OPERATOR_VERSION=v0.85.0
#   K8S_BASE=$HOME/.cache/wirebench-k8s   binaries and build modules (shared by instances)
#   K8S_RUN=$K8S_BASE/run                 one instance: PIDs, logs, certificates, etcd data
#   ETCD_PORT=23790 ETCD_PEER_PORT=23800 APISERVER_PORT=16443   (per instance)
#   CRDS="file-or-dir ..."                CRDs to apply (server side) once the server is ready
#   BENCH_LOCK=/tmp/bench.lock            builds run under `flock $BENCH_LOCK` (a shared
#                                         machine: builds do not collide with benchmarks)
#
# How the build works: kube-apiserver's module (k8s.io/kubernetes) points its 31 staging
# modules at ./staging/src/...; a scratch module that requires k8s.io/kubernetes and
# replaces each staging module with its published v0.x twin builds from the module proxy
# alone. etcd's server module gets the same treatment for its four sibling modules.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
PROM_OPERATOR_VERSION=${PROM_OPERATOR_VERSION:-v0.85.0}
BASE=${K8S_BASE:-$HOME/.cache/wirebench-k8s}
BIN=$BASE/bin
RUN=${K8S_RUN:-$BASE/run}
ETCD_PORT=${ETCD_PORT:-23790}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-23800}
APISERVER_PORT=${APISERVER_PORT:-16443}
BENCH_LOCK=${BENCH_LOCK:-/tmp/bench.lock}
if [ -z "${GO:-}" ]; then GO=$(command -v go || echo /usr/local/go/bin/go); fi
export PATH=$(dirname "$GO"):$PATH
export GOFLAGS=-mod=mod

log() { echo "[apiserver.sh] $*" >&2; }

# ------------------------------------------------------------------ build ----
k8s_ok() { [ -x "$BIN/kube-apiserver" ] && [ "$("$BIN/kube-apiserver" --version 2>/dev/null)" = "Kubernetes $K8S_VERSION" ]; }
etcd_ok() { [ -x "$BIN/etcd" ] && [ "$("$BIN/etcd" --version 2>/dev/null | head -1)" = "etcd Version: ${ETCD_VERSION#v}" ]; }

build_apiserver() {
  local dir=$BASE/build-k8s-$K8S_VERSION sv="v0${K8S_VERSION#v1}"   # v1.34.4 -> v0.34.4
  mkdir -p "$dir" "$BIN"
  if [ ! -f "$dir/go.mod" ]; then
    (cd "$dir" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" >/dev/null)
    local kmod
    kmod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.mod
    {
      echo "module wirebenchk8s"; echo
      grep -m1 '^go ' "$kmod"; echo
      grep -m1 '^godebug ' "$kmod" || true; echo
      echo "require k8s.io/kubernetes $K8S_VERSION"; echo
      echo "replace ("
      sed -n '/^replace (/,/^)/p' "$kmod" | awk -v v="$sv" '/=> *\.\/staging/ {printf "\t%s => %s %s\n", $1, $1, v}'
      echo ")"
    } > "$dir/go.mod.tmp"
    mv "$dir/go.mod.tmp" "$dir/go.mod"
  fi
  local ldf="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
  ldf+=" -X k8s.io/component-base/version.gitMajor=1"
  ldf+=" -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
  ldf+=" -X k8s.io/component-base/version.gitTreeState=clean"
  log "building kube-apiserver $K8S_VERSION (under $BENCH_LOCK)"
  local t0=$SECONDS
  (cd "$dir" && go get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" 2>&1 | { grep -v '^go: added' || true; } >&2 &&
     flock "$BENCH_LOCK" go build -trimpath -ldflags "$ldf" -o "$BIN/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver >&2)
  mv "$BIN/kube-apiserver.tmp" "$BIN/kube-apiserver"
  log "built kube-apiserver in $((SECONDS - t0)) s (downloads and waiting for the lock included)"
}

build_etcd() {
  local dir=$BASE/build-etcd-$ETCD_VERSION
  mkdir -p "$dir" "$BIN"
  if [ ! -f "$dir/go.mod" ]; then
    (cd "$dir" && go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null)
    local emod
    emod=$(go env GOMODCACHE)/cache/download/go.etcd.io/etcd/server/v3/@v/$ETCD_VERSION.mod
    {
      echo "module wirebenchetcd"; echo
      grep -m1 '^go ' "$emod"; echo
      echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"; echo
      echo "replace ("
      for m in api/v3 client/pkg/v3 client/v3 pkg/v3; do echo "	go.etcd.io/etcd/$m => go.etcd.io/etcd/$m $ETCD_VERSION"; done
      echo ")"
    } > "$dir/go.mod.tmp"
    mv "$dir/go.mod.tmp" "$dir/go.mod"
  fi
  log "building etcd $ETCD_VERSION (under $BENCH_LOCK)"
  local t0=$SECONDS
  (cd "$dir" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" 2>&1 | { grep -v '^go: added' || true; } >&2 &&
     flock "$BENCH_LOCK" go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3 >&2)
  mv "$BIN/etcd.tmp" "$BIN/etcd"
  log "built etcd in $((SECONDS - t0)) s"
}

build() {
  # One builder at a time (tests running in parallel may all ask).
  mkdir -p "$BASE"
  exec 9>"$BASE/build.lock"
  flock 9
  etcd_ok || build_etcd
  k8s_ok || build_apiserver
  crds >/dev/null
  exec 9>&-
}

crds() {
  local dir dest=$BASE/crds
  dir=$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROM_OPERATOR_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  mkdir -p "$dest"
  install -m 0644 "$dir/example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml" "$dest/"
  echo "$dest"
}

# ------------------------------------------------------------------ start ----
is_running() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

stop() {
  for name in kube-apiserver etcd; do
    local f=$RUN/$name.pid pid
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    rm -f "$f"
  done
}

die() { log "$1"; [ -n "${2:-}" ] && tail -20 "$2" >&2; stop; exit 1; }

certs() {
  local pki=$RUN/pki
  mkdir -p "$pki"
  [ -f "$pki/admin.crt" ] && return
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=wirebench-test-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc" > apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile apiserver.ext \
      -out apiserver.crt 2>/dev/null
    # An admin client certificate (group system:masters) for the test's own kubectl.
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=admin" 2>/dev/null
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=clientAuth" > client.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile client.ext \
      -out admin.crt 2>/dev/null
    # The ServiceAccount token signing key pair (TokenRequest works without a controller manager).
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ./*.csr
  )
}

start() {
  build
  if is_running kube-apiserver || is_running etcd; then die "already running (pid files in $RUN)"; fi
  mkdir -p "$RUN"
  certs
  rm -rf "$RUN/etcd-data"
  local t0=$SECONDS pki=$RUN/pki
  # etcd reads every ETCD_* variable as a flag: drop this script's.
  setsid env -u ETCD_PORT -u ETCD_PEER_PORT -u ETCD_VERSION "$BIN/etcd" --name default --data-dir "$RUN/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "default=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --log-level warn \
    >"$RUN/etcd.log" 2>&1 </dev/null &
  echo $! >"$RUN/etcd.pid"
  local ok=0
  for _ in $(seq 300); do
    if curl -sf "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1; then ok=1; break; fi
    is_running etcd || die "etcd died" "$RUN/etcd.log"
    sleep 0.1
  done
  [ $ok = 1 ] || die "etcd not healthy after 30 s" "$RUN/etcd.log"
  setsid "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" --client-ca-file "$pki/ca.crt" \
    --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 --endpoint-reconciler-type none --profiling=false \
    --disable-admission-plugins=ServiceAccount \
    >"$RUN/kube-apiserver.log" 2>&1 </dev/null &
  echo $! >"$RUN/kube-apiserver.pid"
  cat >"$RUN/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "https://127.0.0.1:$APISERVER_PORT", certificate-authority: "$pki/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$pki/admin.crt", client-key: "$pki/admin.key"}
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
KC
  ok=0
  for _ in $(seq 900); do
    if curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
      "https://127.0.0.1:$APISERVER_PORT/readyz" >/dev/null 2>&1; then ok=1; break; fi
    is_running kube-apiserver || die "kube-apiserver died" "$RUN/kube-apiserver.log"
    sleep 0.1
  done
  [ $ok = 1 ] || die "kube-apiserver not ready after 90 s" "$RUN/kube-apiserver.log"
  if [ -n "${CRDS:-}" ]; then
    for c in $CRDS; do KUBECONFIG=$RUN/kubeconfig kubectl apply --server-side -f "$c" >&2 || die "CRDs from $c"; done
    # kubectl wait fails at once on a CRD whose status has no conditions yet (just applied):
    # ask again until it answers, within the same 60 s.
    local crd_deadline=$((SECONDS + 60)) crd_err
    until crd_err=$(KUBECONFIG=$RUN/kubeconfig kubectl wait --for=condition=Established crd --all --timeout=60s 2>&1 >/dev/null); do
      [ $SECONDS -lt $crd_deadline ] || { echo "$crd_err" >&2; die "CRDs not Established"; }
      sleep 0.2
    done
  fi
  log "ready in $((SECONDS - t0)) s: https://127.0.0.1:$APISERVER_PORT"
  echo "$RUN/kubeconfig"
}

case "${1:-}" in
  build) build ;;
  start) start ;;
  stop) stop ;;
  crds) crds ;;
  *) echo "usage: $0 build|start|stop|crds" >&2; exit 2 ;;
esac
