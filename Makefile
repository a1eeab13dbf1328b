# The two entry points of the README. Both set up the host first.
.PHONY: setup build run test vet fuzz soak

BIN := bin/boxer

setup:
	./scripts/setup.sh

build:
	go build -o $(BIN) ./cmd/boxer

# Set up the host, build, and serve on the embedded defaults.
run: setup build
	./$(BIN) serve

# Set up the host and run every check and test. The sandbox tests run real
# sandboxes and need root; the x402 test has the protocol's official client
# pay the real server on a local chain.
test:
	./scripts/setup.sh --test
	$(MAKE) vet
	./test/x402e2e/run.sh
	$(MAKE) fuzz
	go run ./bench/soak -n $(SOAK_N) -c $(SOAK_C)
	go test -count=1 -timeout 20m ./...

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...

# The soak at CI size; the full one: make soak SOAK_N=10000 SOAK_C=32
SOAK_N ?= 90
SOAK_C ?= 8
soak:
	go run ./bench/soak -n $(SOAK_N) -c $(SOAK_C)

# Each fuzz target for FUZZTIME (CI: 10s each). For a long run:
#   make fuzz FUZZTIME=30m
FUZZTIME ?= 10s
fuzz:
	go test -run '^$$' -fuzz '^FuzzCheckRelPath$$' -fuzztime $(FUZZTIME) .
	go test -run '^$$' -fuzz '^FuzzParseJSON$$' -fuzztime $(FUZZTIME) ./internal/api
	go test -run '^$$' -fuzz '^FuzzDecodeExec$$' -fuzztime $(FUZZTIME) ./internal/api
	go test -run '^$$' -fuzz '^FuzzDecodeRunPython$$' -fuzztime $(FUZZTIME) ./internal/api
	go test -run '^$$' -fuzz '^FuzzDecodePaymentHeader$$' -fuzztime $(FUZZTIME) ./internal/x402
