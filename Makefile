# Shortcuts for the scripts the README names (which need no make).
.PHONY: run test build fuzz soak

run:
	./scripts/run.sh

test:
	./scripts/test.sh

build:
	go build -o bin/boxer ./cmd/boxer

# Each fuzz target for FUZZTIME; a long run: make fuzz FUZZTIME=30m
FUZZTIME ?= 10s
fuzz:
	go test -run '^$$' -fuzz '^FuzzCheckRelPath$$' -fuzztime $(FUZZTIME) .
	go test -run '^$$' -fuzz '^FuzzParseJSON$$' -fuzztime $(FUZZTIME) ./internal/api
	go test -run '^$$' -fuzz '^FuzzDecodeExec$$' -fuzztime $(FUZZTIME) ./internal/api
	go test -run '^$$' -fuzz '^FuzzDecodeRunPython$$' -fuzztime $(FUZZTIME) ./internal/api
	go test -run '^$$' -fuzz '^FuzzDecodePaymentHeader$$' -fuzztime $(FUZZTIME) ./internal/x402

# The soak; the full size: make soak SOAK_N=10000 SOAK_C=32
SOAK_N ?= 90
SOAK_C ?= 8
soak:
	go run ./bench/soak -n $(SOAK_N) -c $(SOAK_C)
