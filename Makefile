GO ?= go

.PHONY: test test-short bench fuzz run

# The one test command: installs and starts a throwaway Redis and a
# three-master Redis Cluster, runs every test with the race detector,
# then runs the Lua specs through the CLI on the embedded backend.
test:
	bash scripts/with-redis.sh $(GO) test -race -count=1 -timeout 15m ./...

bench:
	bash scripts/with-redis.sh $(GO) test -run=NONE -bench=. -benchmem ./...

fuzz:
	$(GO) test -run=NONE -fuzz=FuzzDecode -fuzztime=60s ./core/codec

run:
	$(GO) run ./cmd/shield run examples/quickstart.lua
