# Multi-stage build: cgo is needed for SQLite (mattn/go-sqlite3).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w" -o /out/lockstep ./cmd/lockstep

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/lockstep --create-home lockstep
COPY --from=build /out/lockstep /usr/local/bin/lockstep
USER lockstep
ENV LOCKSTEP_HOME=/var/lib/lockstep
VOLUME ["/var/lib/lockstep"]
# 22100: sync connections (and, over UDP, LAN discovery). 8385: console
# and REST (bound to loopback unless configured otherwise). 8443 and 22067:
# the discovery service and relay of `serve --discovery --relay`.
EXPOSE 22100 22100/udp 8443 22067
ENTRYPOINT ["lockstep"]
CMD ["serve"]
