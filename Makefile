# lockstep: the two commands that matter are `make run` and `make test`.
GO       ?= go
BIN      := bin/lockstep
HOME_DIR ?= .home
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: build run test test-short bench bench-e2e vet fmt proto docker

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/lockstep

# A node with its console on 127.0.0.1:8385 and its home in ./.home.
run: build
	$(BIN) --home $(HOME_DIR) serve --listen tcp://127.0.0.1:22100 --gui 127.0.0.1:8385

# Every test, against real components. The S3 tests need versitygw
# (.ci/run installs it; elsewhere they skip with a message unless CI=true).
test: vet
	$(GO) test -count=1 -timeout 15m ./...

test-short:
	$(GO) test -short -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2x -timeout 30m ./...

# The end-to-end benchmarks alone, once each: real nodes on seeded data
# (the standard set of 10,000 small files and 4 x 256 MiB, a local and an
# S3 receiver, 100,000 files for checks), each figure as a metric of its
# line (docs/performance.md says what each is). BENCH narrows them.
BENCH ?= BenchmarkSync|BenchmarkReceiverIngest|BenchmarkCheckManyFiles
bench-e2e:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 60m ./test

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

fmt:
	gofmt -w $$(git ls-files '*.go')

# The container image, stamped like `make build` (.git is not in its
# build context).
docker:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t lockstep:$(VERSION) -t lockstep:latest .

# Regenerates the protocol's Go code (needs protoc and protoc-gen-go).
proto:
	$(GO) generate ./sync/protocol
