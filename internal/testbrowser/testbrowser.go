// Package testbrowser starts a headless Chromium for the tests that drive
// the ops console (chromedp). Like internal/testredis it never skips: a
// test that needs the browser and cannot start it fails and says how to get
// one (`make test` installs Debian's chromium package).
package testbrowser

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// EnvPath is the variable that may name the browser binary; otherwise the
// first of chromium, chromium-browser, google-chrome on PATH is used.
const EnvPath = "SHIELD_TEST_CHROMIUM"

// Path returns the browser binary or fails the test.
func Path(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvPath); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s=%s: %v", EnvPath, p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("this test needs a headless Chromium: none of chromium, chromium-browser, google-chrome is on PATH " +
		"(run `make test`, which installs Debian's chromium package)")
	return ""
}

// Start launches the browser (one process, one tab) and returns a context
// for chromedp actions, bounded by timeout; the browser is stopped when the
// test ends. It fails the test when the browser does not start.
func Start(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	path := Path(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root in CI; the sandbox refuses root
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1280, 800),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc() // waits for the browser process to exit
	})
	// Do with no action starts the browser now, so that a browser that
	// cannot start fails here, clearly.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("cannot start %s: %v", path, err)
	}
	return ctx
}
