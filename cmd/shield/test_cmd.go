package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/shieldrt/shieldglobal"
)

// listFlag is a repeatable flag whose values may also be comma-separated
// (busted's --tags=a,b); patterns are kept whole.
type listFlag struct {
	vals  []string
	split bool
}

func (l *listFlag) String() string { return strings.Join(l.vals, ",") }
func (l *listFlag) Set(v string) error {
	if l.split {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				l.vals = append(l.vals, p)
			}
		}
		return nil
	}
	l.vals = append(l.vals, v)
	return nil
}

// specDirs are searched, in order, when no path is given: busted's spec/,
// then the repository's conformance specs.
var specDirs = []string{"spec", "testdata/lua"}

func cmdTest(argv []string, stdout, stderr io.Writer) int {
	fs, cfgPath := newFlags("test", stderr)
	timeout := fs.Duration("timeout", shieldglobal.DefaultSpecTimeout, "time each test (and hook) may take")
	var output string
	fs.StringVar(&output, "output", shieldglobal.SpecHuman, "output format: human, tap, junit or json")
	fs.StringVar(&output, "o", shieldglobal.SpecHuman, "short for --output")
	var pattern, filter, filterOut listFlag
	tags, excludeTags := listFlag{split: true}, listFlag{split: true}
	fs.Var(&pattern, "pattern", "only run test files whose name matches the Lua `pattern` (repeatable; default _spec)")
	fs.Var(&pattern, "p", "short for --pattern")
	fs.Var(&filter, "filter", "only run tests whose full name matches the Lua `pattern` (repeatable)")
	fs.Var(&filterOut, "filter-out", "do not run tests whose full name matches the Lua `pattern` (repeatable; wins over --filter)")
	fs.Var(&tags, "tags", "only run tests with one of these #`tags` (comma-separated, repeatable)")
	fs.Var(&tags, "t", "short for --tags")
	fs.Var(&excludeTags, "exclude-tags", "do not run tests with one of these #`tags` (wins over --tags)")
	shuffle := fs.Bool("shuffle", false, "run files and tests in a random order (see --seed)")
	seed := fs.Int64("seed", 0, "seed for --shuffle (default: the current time, printed)")
	repeat := fs.Int("repeat", 1, "run the tests `count` times")
	list := fs.Bool("list", false, "list the selected tests (file:line: name) instead of running them")
	fs.BoolVar(list, "l", false, "short for --list")
	virtual := fs.Bool("virtual-time", false, "run on the memory backend with a virtual clock that jumps to the next timer when every task waits (see docs/testing.md)")
	if err := fs.Parse(argv); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	for _, t := range tags.vals {
		for _, x := range excludeTags.vals {
			if t == x {
				fmt.Fprintf(stderr, "shield test: tag %q is both in --tags and --exclude-tags\n", t)
				return 2
			}
		}
	}
	if *repeat < 1 {
		fmt.Fprintf(stderr, "shield test: --repeat must be at least 1, got %d\n", *repeat)
		return 2
	}
	seedSet := false
	fs.Visit(func(f *flag.Flag) { seedSet = seedSet || f.Name == "seed" })
	if !seedSet {
		*seed = time.Now().UnixNano() % 1_000_000_000
	}
	paths := fs.Args()
	if len(paths) == 0 {
		for _, d := range specDirs {
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				paths = []string{d}
				break
			}
		}
		if len(paths) == 0 {
			fmt.Fprintf(stderr, "shield test: no spec/ or testdata/lua directory here; name the spec files or directories to run\n")
			return 2
		}
	}
	mod, status := openModule(*cfgPath, stderr)
	if mod == nil {
		return status
	}
	defer closeModule(mod, stderr)
	if *shuffle && !*list {
		// The order can be replayed with --seed.
		fmt.Fprintf(stderr, "shield test: shuffled with --seed %d\n", *seed)
	}
	// Ctrl-C stops the running file; the summary of what ran is printed.
	// A second one exits at once.
	ctx, stop := notifyStop(stderr, 0)
	defer stop()
	res, err := mod.RunSpecs(ctx, paths, stdout, shieldglobal.SpecOptions{
		Timeout: *timeout, Format: output, Pattern: pattern.vals,
		Filter: filter.vals, FilterOut: filterOut.vals, Tags: tags.vals, ExcludeTags: excludeTags.vals,
		Shuffle: *shuffle, Seed: *seed, Repeat: *repeat, List: *list,
		VirtualTime: *virtual,
	})
	if err != nil {
		fmt.Fprintf(stderr, "shield test: %v\n", err)
		return 2
	}
	if res.Failed > 0 || res.Errors > 0 || res.Interrupted {
		return 1
	}
	return 0
}
