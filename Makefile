GO ?= go

.PHONY: test test-short bench fuzz run

# The one test command: installs and starts a throwaway Redis, a
# three-master Redis Cluster and a Sentinel-watched master, and runs every
# test with the race detector (the Lua specs in testdata/lua run inside it,
# on every backend).
test:
	bash scripts/with-redis.sh $(GO) test -race -count=1 -timeout 15m ./...

bench:
	bash scripts/with-redis.sh $(GO) test -run=NONE -bench=. -benchmem ./...

fuzz:
	$(GO) test -run=NONE -fuzz=FuzzDecode -fuzztime=60s ./core/codec

run:
	$(GO) run ./cmd/shield run examples/quickstart.lua
