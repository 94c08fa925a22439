// math.randomseed calls math/rand.Seed, which Go 1.24+ ignores unless this
// setting is 0: without it, seeded loot tables and replays are not
// reproducible. docs/embedding.md tells hosts to add the same line.
//go:debug randseednop=0

// Command shield runs Lua scripts, Lua spec files and a REPL on
// shield_global.
//
//	shield run  [--config F] [-e CODE | script.lua | -] [args...]
//	shield test [--config F] [-o human|tap|junit|json] [busted's flags] [paths...]   (default: spec/, else testdata/lua)
//	shield repl [--config F]
//	shield ops [--config F] [--json] queues|dead|requeue|tasks|pause|resume|disable|enable|trigger|remove|board|lock ...
//	shield config check [FILE]
//	shield scheduler start|stop|restart|status [--pidfile P] [--detach] [DIR...]
//	shield version
//	shield help [COMMAND]
//
// Without --config (or a Redis URL in SHIELD_REDIS_URL) everything runs on
// the embedded memory backend. Each command lives in a file of its own
// (<name>_cmd.go) and is one row of commands below.
package main

import (
	"bytes"
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
		{"run", "[--config FILE] [-e CODE | script.lua | -] [args...]",
			"run a script (- reads it from stdin); stays up while it has subscriptions or scheduled work", cmdRun},
		{"test", "[--config FILE] [--timeout 10s] [-o human|tap|junit|json] [--filter P] [--tags T] [--shuffle] [--list] [paths...]",
			"run busted-style *_spec.lua files (default spec/, else testdata/lua); see docs/testing.md", cmdTest},
		{"repl", "[--config FILE]",
			"an interactive Lua prompt with the shield module on the configured backend", cmdRepl},
		{"version", "",
			"print the version of shield and the Go it was built with", cmdVersion},
		{"help", "[COMMAND]",
			"show the commands, or one command's flags", cmdHelp},
		{"config", "check [FILE]", "validate FILE (or the defaults) with the SHIELD_* environment; print the effective config, secrets masked", cmdConfig},
		{"ops", opsSynopsis, "admin CLI on Redis: list queues, dead letters and tasks, requeue, pause/resume/remove, boards, locks", cmdOps},
		{"scheduler", "start|stop|restart|status [flags] [DIR...]",
			"a standalone scheduler node over task-file directories (shield scheduler --help)", cmdScheduler},
	}
}

func usage() string {
	var b strings.Builder
	b.WriteString("usage: shield COMMAND [flags] [args...]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %s\n      %s\n", strings.TrimSpace("shield "+c.name+" "+c.synopsis), c.summary)
	}
	b.WriteString("\nshield help COMMAND (or shield COMMAND --help) lists a command's flags; shield --version prints the version.\n")
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
	switch {
	case isHelp(argv[0]):
		fmt.Fprint(stdout, usage())
		return 0
	case argv[0] == "-version" || argv[0] == "--version":
		return cmdVersion(nil, stdout, stderr)
	}
	c := lookup(argv[0])
	if c == nil {
		fmt.Fprintf(stderr, "shield: unknown command %q\n%s", argv[0], usage())
		return 2
	}
	con := &console{Writer: stderr, stdout: stdout, command: c}
	if len(argv) > 1 && isHelp(argv[1]) {
		// A command whose flags are not from newFlags or bareFlags (one
		// that reads a subcommand first, say) gets the table's help; what
		// it said about the flag it did not expect is dropped.
		var said bytes.Buffer
		con.Writer = &said
		c.run(argv[1:], stdout, con)
		if !con.helped {
			fmt.Fprint(stdout, commandHelp(c, nil))
		}
		return 0
	}
	status := c.run(argv[1:], stdout, con)
	if con.helped {
		return 0
	}
	return status
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// cmdHelp prints the usage, or the help of one command (its synopsis,
// summary and flags) by running it with --help.
func cmdHelp(argv []string, stdout, stderr io.Writer) int {
	if len(argv) == 0 {
		fmt.Fprint(stdout, usage())
		return 0
	}
	c := lookup(argv[0])
	if c == nil {
		fmt.Fprintf(stderr, "shield help: unknown command %q\n%s", argv[0], usage())
		return 2
	}
	if c.name == "help" {
		fmt.Fprint(stdout, commandHelp(c, nil))
		return 0
	}
	return run([]string{c.name, "--help"}, stdout, unwrap(stderr))
}

// console is the stderr a command gets from run. newFlags and openModule
// find in it what the dispatcher knows (the command, the real stdout) and
// leave in it what the flags said (help asked for, log settings), so that
// a command's file stays the same shape: parse flags, return 2 on an error.
type console struct {
	io.Writer // stderr
	stdout    io.Writer
	command   *command
	helped    bool   // --help printed the command's help: exit 0
	logLevel  string // --log-level, "" when not given
	logFormat string // --log-format, "" when not given
}

func unwrap(w io.Writer) io.Writer {
	if c, ok := w.(*console); ok {
		return c.Writer
	}
	return w
}

// commandHelp is the help of one command: usage line, summary, flags.
func commandHelp(c *command, fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n\n%s\n", strings.TrimSpace("shield "+c.name+" "+c.synopsis), c.summary)
	if fs != nil {
		var flags bytes.Buffer
		fs.SetOutput(&flags)
		fs.PrintDefaults()
		if flags.Len() > 0 {
			b.WriteString("\nflags:\n")
			b.Write(flags.Bytes())
		}
	}
	return b.String()
}

// flagOutput is where a flag set writes its parse errors; it remembers
// that one was written, so that Usage can tell an error from -h.
type flagOutput struct {
	w      io.Writer
	failed bool
}

func (o *flagOutput) Write(p []byte) (int, error) {
	o.failed = true
	return o.w.Write(p)
}

// newFlags is the flag set of one command, with the flags every command that
// reaches a backend takes: --config, --log-level and --log-format. -h and
// --help print the command's own help on stdout and make shield exit 0; a
// bad flag prints the error and the help on stderr (the command returns 2).
func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := bareFlags(name, stderr)
	cfgPath := fs.String("config", "", "YAML config file (default: built-in defaults, memory backend)")
	con := consoleOf(stderr)
	fs.StringVar(&con.logLevel, "log-level", "", "lowest level logged to stderr: debug, info, warn or error (default global.log.level, info)")
	fs.StringVar(&con.logFormat, "log-format", "", "log line format: text or json (default global.log.format, text)")
	return fs, cfgPath
}

// bareFlags is a command's flag set without the common flags, for commands
// that reach no backend; -h and --help behave as with newFlags.
func bareFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("shield "+name, flag.ContinueOnError)
	out := &flagOutput{w: unwrap(stderr)}
	fs.SetOutput(out)
	con := consoleOf(stderr)
	fs.Usage = func() {
		c := con.command
		if c == nil {
			c = &command{name: name}
		}
		help := commandHelp(c, fs)
		fs.SetOutput(out)
		if out.failed { // after a parse error
			fmt.Fprint(out.w, help)
			return
		}
		con.helped = true
		fmt.Fprint(con.stdout, help)
	}
	return fs
}

// consoleOf is the *console a command got as stderr from run, or one made
// up for a command called directly (its help goes to stderr).
func consoleOf(stderr io.Writer) *console {
	if con, ok := stderr.(*console); ok {
		return con
	}
	return &console{Writer: stderr, stdout: stderr}
}
