package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// go test ./cmd/shield -run TestSpecGolden -update rewrites the expected
// outputs in testdata/golden from what `shield test` prints now.
var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden")

// Timings change from run to run; everything else must not.
var (
	junitTime = regexp.MustCompile(`(time|timestamp)="[^"]*"`)
	jsonTime  = regexp.MustCompile(`"duration": [0-9.e-]+`)
)

func normalize(s string) string {
	s = junitTime.ReplaceAllString(s, `$1="X"`)
	return jsonTime.ReplaceAllString(s, `"duration": 0`)
}

// Each flag, double and output format of `shield test` against an expected
// output file (exit status first). The fixtures are testdata/specs/*.
func TestSpecGolden(t *testing.T) {
	const basic = "testdata/specs/basic_spec.lua"
	cases := []struct {
		name string
		args []string
	}{
		{"human", []string{basic}},
		{"tap", []string{"-o", "TAP", basic}}, // busted spells it so
		{"output_unknown", []string{"-o", "xml", basic}},
		{"junit", []string{"--output", "junit", basic}},
		{"json", []string{"-o", "json", basic}},
		{"doubles", []string{"testdata/specs/doubles_spec.lua"}},
		{"filter", []string{"--filter", "nested", "--filter", "fails", basic}},
		{"filter_out", []string{"--filter-out", "raises", basic}},
		{"filter_and_out", []string{"--filter", "outcomes", "--filter-out", "table", basic}},
		{"tags", []string{"--tags", "slow", basic}},
		{"tags_short", []string{"-t", "fast,slow", "--exclude-tags", "nothing", basic}},
		{"exclude_tags", []string{"--exclude-tags", "slow", basic}},
		{"list", []string{"--list", "testdata/specs"}},
		{"list_filtered", []string{"-l", "--tags", "slow", "testdata/specs"}},
		{"pattern", []string{"--pattern", "_test", "testdata/specs"}},
		{"pattern_none", []string{"-p", "_nothing", "testdata/specs"}},
		{"shuffle", []string{"--shuffle", "--seed", "7", "--filter-out", "table", "testdata/specs/doubles_spec.lua", basic}},
		{"repeat", []string{"--repeat", "2", "--filter", "passes", basic}},
		{"timeout", []string{"--timeout", "300ms", "testdata/specs/more/timeout_spec.lua"}},
		{"tags_conflict", []string{"--tags", "slow", "--exclude-tags", "slow", basic}},
		{"doubles_misuse", []string{"testdata/specs/more/misuse_spec.lua"}},
		{"doubles_messages", []string{"testdata/doubles/messages_spec.lua"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"test"}, c.args...), &stdout, &stderr)
			got := "exit " + string(rune('0'+code)) + "\n" + normalize(stdout.String())
			path := filepath.Join("testdata", "golden", c.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("shield test %s: output differs from %s\n--- got:\n%s\n--- want:\n%s\n--- stderr:\n%s",
					strings.Join(c.args, " "), path, got, want, stderr.String())
			}
		})
	}
}

// Without paths, `shield test` runs spec/ (busted's default) if it exists,
// else testdata/lua; with neither it says so (status 2).
func TestSpecDefaultDirectories(t *testing.T) {
	for _, c := range []struct {
		dirs []string
		code int
		want string
	}{
		{[]string{"spec", "testdata/lua"}, 0, "# spec/a_spec.lua\nok - found in spec"},
		{[]string{"testdata/lua"}, 0, "# testdata/lua/a_spec.lua\nok - found in testdata/lua"},
		{nil, 2, ""},
	} {
		root := t.TempDir()
		for _, d := range c.dirs {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
			src := `it("found in ` + d + `", function() end)`
			if err := os.WriteFile(filepath.Join(root, d, "a_spec.lua"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Chdir(root)
		var stdout, stderr bytes.Buffer
		code := run([]string{"test"}, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String(), c.want) {
			t.Errorf("dirs %v: exit %d\n%s\n%s", c.dirs, code, stdout.String(), stderr.String())
		}
		if c.code == 2 && !strings.Contains(stderr.String(), "no spec/ or testdata/lua directory") {
			t.Errorf("no directory: stderr %q", stderr.String())
		}
	}
}
