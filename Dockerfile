# syntax=docker/dockerfile:1
# exchange: 1C -> online shop. Two stages: the wheel is built in `build`, and only the wheel
# (with the PostgreSQL driver) is installed in the slim runtime. How to build, migrate and run
# it: docs/deployment.md ("Docker").
#
#   docker build -t exchange:0.1.0 .
#   docker run --rm -v exchange-data:/data exchange:0.1.0 migrate          # once per release
#   docker run -d --name exchange --stop-timeout 90 -v exchange-data:/data \
#       -e EXCHANGE_SITE_URL=https://shop.example.com \
#       -v /etc/exchange/site_token:/run/secrets/exchange_site_token:ro exchange:0.1.0
#   docker run -d --name exchange-serve -p 8443:8080 -v exchange-data:/data \
#       -e EXCHANGE_1C_USER=obmen -e EXCHANGE_1C_PRICE_TYPES='{"Розничная": "retail"}' \
#       -e EXCHANGE_HTTP_BEHIND_PROXY=true \
#       -e EXCHANGE_1C_PASSWORD_FILE=/run/secrets/exchange_1c_password \
#       -v /etc/exchange/1c_password:/run/secrets/exchange_1c_password:ro \
#       --health-cmd "python -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)\"" \
#       exchange:0.1.0 serve
#   (serve listens on 0.0.0.0 in the container: give it TLS with EXCHANGE_HTTP_TLS_CERT/_KEY, or
#   say a proxy terminates TLS with EXCHANGE_HTTP_BEHIND_PROXY=true; else it refuses to start.)

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# -- build: the wheel, with the migrations packaged as exchange/_migrations ---------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY exchange ./exchange
COPY migrations ./migrations
# The build backend (hatchling) is pinned by pyproject's [build-system] and fetched into pip's
# isolated build environment; the package itself is what is being built, so it has no version pin.
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist . \
    && ls -l /dist/*.whl

# -- runtime ------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="exchange" \
      org.opencontainers.image.description="Carries price changes and financial postings from 1C:Enterprise to an online shop."

# EXCHANGE_SITE_TOKEN_FILE is the path where the secret is mounted, not the secret itself: the
# token never enters the image (pass it with a secret or a read-only bind mount).
# hadolint ignore=DL3064
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    EXCHANGE_DATABASE_URL=sqlite:////data/exchange.db \
    EXCHANGE_REPORT_DIR=/data/reports \
    EXCHANGE_SITE_TOKEN_FILE=/run/secrets/exchange_site_token \
    EXCHANGE_METRICS_PORT=9100 \
    EXCHANGE_HTTP_HOST=0.0.0.0 \
    EXCHANGE_1C_DIR=/data/1c

# The wheel is mounted from the build stage, not copied, so it leaves no layer behind. Its
# dependencies are resolved from the ranges in pyproject.toml; the package is the wheel itself.
# psycopg[binary] ships its own libpq, so the runtime needs no apt packages at all.
# DL3013 (pin versions): what is installed is the wheel built above, by file name; a version
# pin cannot apply to a local file, and the dependencies' ranges come from pyproject.toml.
# hadolint ignore=DL3013
RUN --mount=type=bind,from=build,source=/dist,target=/tmp/dist \
    set -eu; \
    wheel="$(ls /tmp/dist/exchange-*.whl)"; \
    pip install --no-cache-dir "${wheel}[postgres]"; \
    groupadd --system --gid 10001 exchange; \
    useradd --system --uid 10001 --gid exchange --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin exchange; \
    mkdir -p /data/reports; \
    chown -R exchange:exchange /data; \
    exchange --help > /dev/null

# Numeric, so that Kubernetes' runAsNonRoot can verify it (user and group `exchange`).
USER 10001:10001
WORKDIR /data
# The SQLite file (EXCHANGE_DATABASE_URL) and the operators' reports (EXCHANGE_REPORT_DIR).
# With PostgreSQL only the reports live here.
VOLUME ["/data"]
# Prometheus /metrics and /healthz of `exchange run` (EXCHANGE_METRICS_PORT).
EXPOSE 9100
# exchange serve (EXCHANGE_HTTP_PORT): 1C's exchange and the JSON intake.
EXPOSE 8080

# /healthz answers 200 while the database answers and a cycle finished recently, 503 otherwise;
# urlopen raises on 503 and on a refused connection, so the exit status follows. slim has no
# curl, hence Python. The start period covers the allowance before the first cycle (60 s).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('EXCHANGE_METRICS_PORT', '9100') + '/healthz', timeout=4)"]

# SIGTERM lets the requests in flight finish and be recorded, then `exchange run` exits 0: give
# it time with `docker stop -t 90` / `--stop-timeout 90` (lease seconds + HTTP timeout, rounded up).
STOPSIGNAL SIGTERM
# Migrations are an explicit step, never implicit at start: `docker run … <image> migrate`.
ENTRYPOINT ["exchange"]
CMD ["run"]
