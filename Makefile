GO ?= go

.PHONY: test test-short bench fuzz run faults

# The one test command: installs and starts a throwaway Redis, a
# three-master Redis Cluster and a Sentinel-watched master, and runs every
# test with the race detector (the Lua specs in testdata/lua run inside it,
# on every backend). It installs Debian's chromium too when missing: the ops
# console's tests drive it headless (chromedp).
test:
	bash scripts/install-chromium.sh
	bash scripts/with-redis.sh $(GO) test -race -count=1 -timeout 15m ./...

# The fault suite (faults/, build tag faults): real topologies on loopback
# (standalone, Cluster 3+3, Sentinel 1+1+3), a fault-injecting proxy and
# shield processes; prints the table docs/reliability.md carries. It starts
# its own Redis servers, so it only needs redis-server installed.
faults:
	@command -v redis-server >/dev/null && command -v redis-cli >/dev/null || { \
	  echo "faults: installing redis-server from Debian packages" >&2; \
	  s=""; [ "$$(id -u)" -eq 0 ] || s=sudo; \
	  $$s apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$s apt-get install -y -qq redis-server >/dev/null; }
	$(GO) test -tags faults -count=1 -timeout 14m -v ./faults/

bench:
	bash scripts/with-redis.sh $(GO) test -run=NONE -bench=. -benchmem ./...

fuzz:
	$(GO) test -run=NONE -fuzz=FuzzDecode -fuzztime=60s ./core/codec

run:
	$(GO) run ./cmd/shield run examples/quickstart.lua
