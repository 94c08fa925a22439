package shieldglobal

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/store"
)

// A runtime left open after Module.Close fails every capability call with
// ErrModuleClosed, on memory as on Redis: it neither keeps working on the
// memory backend's data nor reports the closed client's "redis: client is
// closed".
func TestCallsAfterModuleCloseFailWithErrModuleClosed(t *testing.T) {
	for name, cfg := range map[string]func(*testing.T) Config{
		"memory":  func(*testing.T) Config { return config.Default() },
		"redis":   redisConfig,
		"cluster": clusterConfig,
	} {
		t.Run(name, func(t *testing.T) {
			m := newModule(t, cfg(t))
			rt := newRuntime(t, m)
			if err := rt.RunString(`
				g = shield.global()
				r = shield.rank("closed_board")
				q = shield.queue("closed_q")
				l = shield.distributed_mutex("closed_lock")
				mu = shield.mutex("closed_mutex")
				lim = shield.rate_limiter("closed_lim", { algorithm = "token_bucket", rate = 10, burst = 10 })
				s = shield.scheduler()
				g:set("k", 1)`, "open.lua"); err != nil {
				t.Fatal(err)
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			calls := []string{
				`g:get("k")`, `g:set("k", 2)`, `g:incr("n")`, `g:publish("ch", "x")`,
				`r:update("a", 1)`, `r:top(3)`,
				`q:push("x")`, `q:pop()`,
				`l:acquire(100)`, `mu:acquire(100)`,
				`lim:allow("ip")`,
				`s:interval("closed_task", 1000, function() end)`,
			}
			for _, call := range calls {
				err := rt.RunString(call, "after.lua")
				if err == nil || !strings.Contains(err.Error(), "shield: module closed") {
					t.Errorf("%s after Module.Close: %v; want an error saying %q", call, err, ErrModuleClosed)
				}
			}
			// Go code called from the runtime (a host function taking a
			// context) sees the module's end as the cause of its context:
			// the store Ops it runs with it fail with ErrModuleClosed.
			var cause error
			if err := rt.Set("probe", func(ctx context.Context) {
				cause = context.Cause(ctx)
			}); err != nil {
				t.Fatal(err)
			}
			if err := rt.RunString(`probe()`, "probe.lua"); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(cause, ErrModuleClosed) {
				t.Errorf("a host function's context after Module.Close ended with %v; want ErrModuleClosed", cause)
			}
			if _, err := store.Failed[int](errors.New("refused")).Do(cancelled(cause)); !errors.Is(err, ErrModuleClosed) {
				t.Errorf("an Op under that context: %v", err)
			}
		})
	}
}

// cancelled is a context that ended with cause.
func cancelled(cause error) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	return ctx
}
