package main

import (
	"fmt"
	"io"

	"github.com/shieldrt/shieldglobal"
)

func cmdTest(argv []string, stdout, stderr io.Writer) int {
	fs, cfgPath := newFlags("test", stderr)
	timeout := fs.Duration("timeout", shieldglobal.DefaultSpecTimeout, "time each test (and hook) may take")
	output := fs.String("output", shieldglobal.SpecHuman, "output format: human, tap or junit")
	virtual := fs.Bool("virtual-time", false, "run on the memory backend with a virtual clock that jumps to the next timer when every task waits (see docs/testing.md)")
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	mod, status := openModule(*cfgPath, stderr)
	if mod == nil {
		return status
	}
	defer closeModule(mod, stderr)
	paths := fs.Args()
	if len(paths) == 0 {
		paths = []string{"testdata/lua"}
	}
	// Ctrl-C stops the running file; the summary of what ran is printed.
	// A second one exits at once.
	ctx, stop := notifyStop(stderr, 0)
	defer stop()
	res, err := mod.RunSpecs(ctx, paths, stdout, shieldglobal.SpecOptions{Timeout: *timeout, Format: *output, VirtualTime: *virtual})
	if err != nil {
		fmt.Fprintf(stderr, "shield test: %v\n", err)
		return 2
	}
	if res.Failed > 0 || res.Interrupted {
		return 1
	}
	return 0
}
