package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// version, when set at link time (go build -ldflags "-X main.version=v1.2.3"),
// is the version shield reports; otherwise the module version from the build
// information is: the tag for `go install ...@v1.2.3`, a pseudo-version for
// `@latest` of an untagged commit, "(devel)" for a build in a checkout.
var version = ""

func cmdVersion(argv []string, stdout, stderr io.Writer) int {
	fs := bareFlags("version", stderr)
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shield version: takes no arguments\n")
		return 2
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionLine(info, version))
	return 0
}

// versionLine is `shield VERSION [(REVISION, TIME[, modified])] GO OS/ARCH`:
// the module version (or override when set) and the VCS stamp Go puts into
// binaries built in a git checkout. Since Go 1.24 such a build's version is
// a pseudo-version naming the commit (v0.0.0-20261202030432-6eb5a90a1ad1,
// +dirty when modified), and then the revision is not repeated; it is
// shown with a version that does not name it (a tag, "(devel)", a link-time
// version). -buildvcs=false and builds outside a checkout have no stamp.
func versionLine(info *debug.BuildInfo, override string) string {
	v := override
	if v == "" && info != nil {
		v = info.Main.Version
	}
	if v == "" {
		v = "(unknown)"
	}
	line := "shield " + v
	if info != nil {
		var rev, at, modified string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = ", modified"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" && !strings.Contains(v, rev) { // a pseudo-version names the commit already
			if at != "" {
				rev += ", " + at
			}
			line += " (" + rev + modified + ")"
		}
	}
	goVersion := runtime.Version()
	if info != nil && info.GoVersion != "" {
		goVersion = info.GoVersion
	}
	return fmt.Sprintf("%s %s %s/%s", line, goVersion, runtime.GOOS, runtime.GOARCH)
}

// moduleVersion is the version alone (the REPL's banner).
func moduleVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(unknown)"
}
