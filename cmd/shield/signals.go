package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// exit ends the process (a variable for the tests of notifyStop).
var exit = os.Exit

// forceExitSlack is how long past stopDeadline the process may still run
// before notifyStop ends it: every step of the shutdown has a bound, this
// is the backstop for one that has not.
const forceExitSlack = 3 * time.Second

// notifyStop returns a context cancelled by the first SIGINT or SIGTERM. A
// second signal ends the process at once (status 1), and so does the
// backstop when the process is still up that long after the first signal
// (0: no backstop). stop releases the signals.
func notifyStop(stderr io.Writer, backstop time.Duration) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			cancel(fmt.Errorf("%v signal received", sig))
		case <-quit:
			return
		}
		var late <-chan time.Time
		if backstop > 0 {
			t := time.NewTimer(backstop)
			defer t.Stop()
			late = t.C
		}
		select {
		case sig := <-sigs:
			fmt.Fprintf(stderr, "shield: stopping now (second signal: %v); tasks are not waited for\n", sig)
			exit(1)
		case <-late:
			fmt.Fprintf(stderr, "shield: still not stopped %v after the signal; exiting\n", backstop)
			exit(1)
		case <-quit:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(quit)
		cancel(nil)
	}
}
