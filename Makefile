# make test is what CI runs (.ci/run): formatting, vet, staticcheck, every
# test under the race detector, including the PostgreSQL store suite and the
# fuzz targets' committed corpora, and a short fuzzing budget.
GO          ?= go
GOBIN       := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(GOBIN)/staticcheck
STATICCHECK_VERSION := v0.8.2

# The PostgreSQL suite fails loudly (not skips) when this is set and the
# server does not answer. Override to point elsewhere; empty it to skip.
WAMUX_TEST_POSTGRES ?= postgres://postgres@127.0.0.1:5432/test
export WAMUX_TEST_POSTGRES
# The same for the Redis tests (ratelimit/redislimit, receipts/redisbloom,
# notify/redisnotify), on a real redis-server.
WAMUX_TEST_REDIS ?= redis://127.0.0.1:6379/0
export WAMUX_TEST_REDIS

.PHONY: test fmt-check vet staticcheck unit fuzz fuzz-short build bench chaos test-cluster

test: fmt-check vet staticcheck unit fuzz-short

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

# The cluster-mode tests (streams on Kafka through an in-process kfake
# cluster, the receipt pipeline in stream mode; limiters, pair limits, app
# pause, receipt Bloom and settings fan-out on the real redis-server of
# WAMUX_TEST_REDIS), under the race detector. They stay fast enough to run
# in make test as well; this target runs them alone.
CLUSTER_PKGS ?= ./stream/... ./ratelimit/redislimit/... ./receipts/redisbloom/... ./notify/...
# Then the fleet test (docs/cluster.md): three `wamux serve` children on a
# kfake cluster, PostgreSQL and Redis, one killed and another restarted
# mid-run; make test runs its two-node variant.
test-cluster:
	$(GO) test -race -count=1 $(CLUSTER_PKGS)
	$(GO) test -race -count=1 -run 'StreamMode' ./receipts
	$(GO) test -count=1 -timeout 15m -run 'TestCluster' -v ./cluster -cluster.full

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

# Fuzz targets (docs/reliability.md): make fuzz runs each for FUZZTIME;
# FUZZ_SAVE=N keeps up to N new small inputs per target in its package's
# testdata/fuzz, which plain go test replays. FUZZ=pkg or pkg.FuzzName
# narrows the run. make test fuzzes the parsers of the least trusted input,
# each for FUZZTIME_SHORT.
FUZZTIME       ?= 30s
FUZZTIME_SHORT ?= 4s
FUZZ_SAVE      ?= 0
FUZZ           ?=
FUZZ_SHORT     ?= provider/cloudapi.FuzzParseWebhook provider/cloudapi.FuzzVerifySignature admit.FuzzAdmit webhooksig.FuzzVerify
fuzz:
	FUZZTIME=$(FUZZTIME) FUZZ_SAVE=$(FUZZ_SAVE) scripts/fuzz.sh $(FUZZ)

fuzz-short:
	FUZZTIME=$(FUZZTIME_SHORT) FUZZ_SAVE=0 scripts/fuzz.sh $(FUZZ_SHORT)
