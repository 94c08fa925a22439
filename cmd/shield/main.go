// Command shield runs Lua scripts and Lua spec files on shield_global.
//
//	shield run  [--config F] script.lua [args...]
//	shield test [--config F] [--timeout 10s] [--output human|tap|junit] [paths...]   (default: testdata/lua)
//
// Without --config (or a Redis URL in SHIELD_REDIS_URL) everything runs on
// the embedded memory backend. Each command lives in a file of its own
// (<name>_cmd.go) and is one row of commands below.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// command is one subcommand of shield: its name, its argument synopsis and
// one-line summary for the usage text, and its entry point, which gets the
// arguments after the name and returns the exit status.
type command struct {
	name     string
	synopsis string
	summary  string
	run      func(argv []string, stdout, stderr io.Writer) int
}

// commands is the command table: adding a command is a file and a row. It
// is filled in init because the commands print the usage built from it.
var commands []command

func init() {
	commands = []command{
		{"run", "[--config FILE] script.lua [args...]",
			"run a script; stays up while it has subscriptions or scheduled work", cmdRun},
		{"test", "[--config FILE] [--timeout 10s] [--output human|tap|junit] [paths...]",
			"run *_spec.lua files (default testdata/lua); --timeout bounds each test", cmdTest},
		{"scheduler", "start|stop|restart|status [flags] [DIR...]",
			"a standalone scheduler node over task-file directories (shield scheduler --help)", cmdScheduler},
	}
}

func usage() string {
	var b strings.Builder
	b.WriteString("usage:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  shield %s %s\n      %s\n", c.name, c.synopsis, c.summary)
	}
	return b.String()
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(argv []string, stdout, stderr io.Writer) int {
	if len(argv) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	for _, c := range commands {
		if c.name == argv[0] {
			return c.run(argv[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "shield: unknown command %q\n%s", argv[0], usage())
	return 2
}

// newFlags is the flag set of one command, with the --config flag every
// command that reaches a backend takes.
func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("shield "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "YAML config file (default: built-in defaults, memory backend)")
	return fs, cfgPath
}
