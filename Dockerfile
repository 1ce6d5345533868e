# syntax=docker/dockerfile:1
# Multi-stage build: cgo is needed for SQLite (mattn/go-sqlite3).
#
#   make docker                       # stamps the version and commit
#   docker build --build-arg VERSION=v1.2.3 --build-arg COMMIT=abc123 -t lockstep .
#
# .dockerignore keeps local homes (keys, API key), binaries and .git out of
# the build context.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The same stamp as the Makefile's LDFLAGS; .git is not in the context, so
# without these the binary says "dev (commit unknown)".
ARG VERSION=dev
ARG COMMIT=
RUN CGO_ENABLED=1 go build -trimpath \
    -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
    -o /out/lockstep ./cmd/lockstep

FROM debian:bookworm-slim
# curl is for the health check only.
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 lockstep \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/lockstep --create-home lockstep \
    && chmod 0700 /var/lib/lockstep
COPY --from=build /out/lockstep /usr/local/bin/lockstep
COPY --chmod=0755 deploy/entrypoint.sh /usr/local/bin/lockstep-entrypoint
USER 10001:10001
ENV LOCKSTEP_HOME=/var/lib/lockstep
# The home: identity, database, API key, console certificate, and the
# blobs unless they go to S3. Losing it loses the device's identity.
VOLUME ["/var/lib/lockstep"]
# 22100: sync connections (and, over UDP, LAN discovery). 8385: console and
# REST; beyond the container only with --gui 0.0.0.0:8385, which serves
# HTTPS once the admin password is set (the entrypoint sets it from
# $LOCKSTEP_CONSOLE_PASSWORD_FILE). 8443 and 22067: the discovery service
# and relay of `serve --discovery --relay`.
EXPOSE 22100 22100/udp 8385 8443 22067
# /healthz needs no login. serve.json, written once the node is ready,
# says where the console listens (http or https on 127.0.0.1); the
# console's certificate is in the home and names 127.0.0.1, so curl
# verifies it instead of skipping verification. The body is checked too:
# another path would answer a redirect to the login page, which curl -f
# takes for success. A node run with --no-gui has no console to ask and
# shows as unhealthy.
HEALTHCHECK --interval=30s --timeout=10s --start-period=2m --retries=3 \
    CMD gui="$(sed -n 's/^ *"gui": *"\([^"]*\)".*/\1/p' "$LOCKSTEP_HOME/serve.json")" \
        && [ -n "$gui" ] \
        && curl -fsS --max-time 5 --cacert "$LOCKSTEP_HOME/gui-cert.pem" "$gui/healthz" | grep -q '"status":"ok"'
ENTRYPOINT ["lockstep-entrypoint"]
CMD ["serve"]
