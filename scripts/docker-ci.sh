#!/bin/sh
# Build the image and run migrate, demo and serve in it, where base images cannot be pulled
# (issue 14): Docker from Debian's packages, a stand-in base made by debootstrap (bookworm with
# python3) and `docker import`, passed as PYTHON_IMAGE; the `# syntax=` line (it pulls a
# frontend image) is left out of the build's copy of the Dockerfile. .ci/run runs it; by hand
# (as root):   time sh scripts/docker-ci.sh   (about 2 min the first time, 30 s after)
set -eu
cd "$(dirname "$0")/.."
WORK=${WORK:-/tmp/exchange-docker-ci}
BASE=exchange-base:bookworm
IMAGE=exchange:ci
mkdir -p "$WORK"
stamp() { echo "[$(date -u +%H:%M:%S)] $*"; }

if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
    stamp "installing docker.io and debootstrap from Debian's packages"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
fi
DOCKER=/usr/bin/docker
if ! "$DOCKER" info >/dev/null 2>&1; then
    stamp "starting dockerd"
    /usr/sbin/dockerd >"$WORK/dockerd.log" 2>&1 &
    for _ in $(seq 60); do "$DOCKER" info >/dev/null 2>&1 && break; sleep 1; done
fi

if ! "$DOCKER" image inspect "$BASE" >/dev/null 2>&1; then
    stamp "debootstrap bookworm with python3 (the stand-in for python:3.11-slim)"
    rm -rf "$WORK/rootfs"
    # The machine's own Debian mirror, as apt is configured here (deb822 or one-line sources).
    MIRROR=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | grep -v security | head -n 1)
    [ -n "$MIRROR" ] || MIRROR=$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' \
        /etc/apt/sources.list 2>/dev/null)
    debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates \
        bookworm "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1
    # python:*-slim has `python` and lets pip install into the system: the stand-in too.
    ln -sf python3 "$WORK/rootfs/usr/bin/python"
    rm -f "$WORK"/rootfs/usr/lib/python3*/EXTERNALLY-MANAGED
    rm -rf "$WORK/rootfs/var/cache/apt/archives/"*.deb
    # This host's certificate authorities (a company proxy may stand between pip and PyPI):
    # the build stage fetches hatchling and the runtime stage the dependencies.
    cp /etc/ssl/certs/ca-certificates.crt "$WORK/rootfs/etc/ssl/certs/ca-certificates.crt"
    printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$WORK/rootfs/etc/pip.conf"
    tar -C "$WORK/rootfs" -c . | "$DOCKER" import - "$BASE" >/dev/null
fi

stamp "building $IMAGE"
grep -v '^# syntax=' Dockerfile >"$WORK/Dockerfile"
DOCKER_BUILDKIT=1 "$DOCKER" build -q -f "$WORK/Dockerfile" --build-arg PYTHON_IMAGE="$BASE" \
    -t "$IMAGE" . >/dev/null

stamp "migrate and demo in the image"
"$DOCKER" volume rm -f exchange-ci-data >/dev/null 2>&1 || true
"$DOCKER" run --rm -v exchange-ci-data:/data "$IMAGE" migrate
"$DOCKER" run --rm -v exchange-ci-data:/data "$IMAGE" demo >"$WORK/demo.log" 2>&1
tail -n 3 "$WORK/demo.log"

stamp "serve in the image: checkauth through the published port"
"$DOCKER" rm -f exchange-ci-serve >/dev/null 2>&1 || true
"$DOCKER" run -d --name exchange-ci-serve -p 127.0.0.1:18080:8080 -v exchange-ci-data:/data \
    -e EXCHANGE_HTTP_BEHIND_PROXY=true -e EXCHANGE_1C_USER=ci -e EXCHANGE_1C_PASSWORD=ci-password-2026 \
    -e 'EXCHANGE_1C_PRICE_TYPES={"Розничная": "retail"}' "$IMAGE" serve >/dev/null
answer=""
for _ in $(seq 30); do
    answer=$(python3 -c "import base64,urllib.request as u; r=u.Request('http://127.0.0.1:18080/1c_exchange.php?type=catalog&mode=checkauth', headers={'Authorization': 'Basic ' + base64.b64encode(b'ci:ci-password-2026').decode()}); print(u.urlopen(r, timeout=3).read().decode().splitlines()[0])" 2>/dev/null || true)
    [ "$answer" = success ] && break
    sleep 1
done
[ "$answer" = success ] || "$DOCKER" logs exchange-ci-serve 2>&1 | tail -n 20
"$DOCKER" stop -t 30 exchange-ci-serve >/dev/null
code=$("$DOCKER" inspect -f '{{.State.ExitCode}}' exchange-ci-serve)
"$DOCKER" rm exchange-ci-serve >/dev/null
[ "$answer" = success ] || { echo "serve did not answer checkauth"; exit 1; }
[ "$code" = 0 ] || { echo "serve exited $code on SIGTERM"; exit 1; }
stamp "image built; migrate, demo and serve ran in it"
