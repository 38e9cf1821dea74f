# make test is what CI runs (.ci/run): formatting, vet, staticcheck, and every
# test under the race detector, including the PostgreSQL store suite.
GO          ?= go
GOBIN       := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(GOBIN)/staticcheck
STATICCHECK_VERSION := v0.8.2

# The PostgreSQL suite fails loudly (not skips) when this is set and the
# server does not answer. Override to point elsewhere; empty it to skip.
WAMUX_TEST_POSTGRES ?= postgres://postgres@127.0.0.1:5432/test
export WAMUX_TEST_POSTGRES
# The same for the Redis tests (ratelimit/redislimit), on a real redis-server.
WAMUX_TEST_REDIS ?= redis://127.0.0.1:6379/0
export WAMUX_TEST_REDIS

.PHONY: test fmt-check vet staticcheck unit build bench chaos

test: fmt-check vet staticcheck unit

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

# Test artifacts (the dashboard screenshot of the browser test) are kept in
# $(TEST_OUTPUT)/_artifacts.
TEST_OUTPUT ?= $(CURDIR)/test-output

unit:
	mkdir -p $(TEST_OUTPUT)
	$(GO) test -race -count=1 -timeout 30m -artifacts -outputdir $(TEST_OUTPUT) ./...

build:
	$(GO) build -o wamux ./cmd/wamux

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Chaos rounds against `wamux serve` children (docs/reliability.md); make
# test runs five short ones. SEED=N replays a round from its seed;
# STORE=postgres://… runs the rounds on PostgreSQL, each in a fresh schema.
ROUNDS ?= 50
SEED   ?= 0
STORE  ?=
chaos:
	$(GO) test -count=1 -timeout 90m -run '^TestChaos$$' -v ./chaos -chaos.rounds=$(ROUNDS) -chaos.seed=$(SEED) -chaos.store=$(STORE)
