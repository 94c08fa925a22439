package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Error is one configuration problem. Parse, Load and Validate return an
// *Error, or several joined with errors.Join.
type Error struct {
	// Source is the file name given to Parse or Load; "" for Validate.
	Source string
	// Line is the 1-based line of the offending key or value in Source; 0
	// when the value did not come from the file (a default, an environment
	// override, or a Config validated directly).
	Line int
	// Path is the dotted key path, e.g. "global.cache.max_size"; "" for
	// problems that concern the whole document.
	Path string
	// Msg describes the problem, including the key path.
	Msg string
	// Err is the underlying error, if any (for example the *fs.PathError of
	// Load).
	Err error
}

// Error formats the problem as "source:line: msg", "source: msg" or "msg".
func (e *Error) Error() string {
	switch {
	case e.Source != "" && e.Line > 0:
		return e.Source + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	case e.Source != "":
		return e.Source + ": " + e.Msg
	case e.Line > 0:
		return "line " + strconv.Itoa(e.Line) + ": " + e.Msg
	}
	return e.Msg
}

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// joinErrors returns nil, the single error, or errors.Join of all of them.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// parse is Parse with an injectable environment (and no check for unknown
// variables).
func parse(data []byte, source string, getenv func(string) string) (Config, error) {
	return parseEnv(data, source, getenv, nil)
}

// parseEnv is Parse with an injectable environment; environ, when not nil,
// is checked for SHIELD_<SECTION>_... variables that name no key.
func parseEnv(data []byte, source string, getenv func(string) string, environ []string) (Config, error) {
	cfg := Default()
	lines, err := decode(&cfg, data, source)
	if err != nil {
		return Config{}, err
	}
	env, errs := cfg.applyEnv(getenv, environ)
	if len(errs) > 0 {
		for _, e := range errs {
			e.(*Error).Source = source
		}
		return Config{}, joinErrors(errs)
	}
	v := validator{source: source, lines: lines, env: env}
	if err := v.run(&cfg); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// yamlLineRE matches the line prefix yaml.v3 puts on syntax errors.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// unknownAnchorRE matches yaml.v3's error for an undefined alias, which
// carries no line.
var unknownAnchorRE = regexp.MustCompile(`^yaml: unknown anchor '(.*)' referenced$`)

// parserProblems are the yaml.v3 messages raised by its parser (as opposed to
// its scanner). yaml.v3 reports 0-based lines for them (and no line at all
// for line 1); syntaxError converts them to 1-based lines.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// syntaxError turns a yaml.v3 parse error into an *Error with the line moved
// into the position: "yaml: line 3: msg" becomes "source:3: yaml: msg".
func syntaxError(err error, data []byte, source string) error {
	msg := err.Error()
	line, problem := 0, strings.TrimPrefix(msg, "yaml: ")
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		problem = m[2]
	}
	switch {
	case parserProblems[problem]:
		line++
	case line == 0 && unknownAnchorRE.MatchString(msg):
		// Find the first use of the alias so the user can locate it.
		name := unknownAnchorRE.FindStringSubmatch(msg)[1]
		re := regexp.MustCompile(`\*` + regexp.QuoteMeta(name) + `\b`)
		if loc := re.FindIndex(data); loc != nil {
			line = lineAt(data, loc[0])
		}
	case line == 0:
		// Reader errors (bad UTF-8, control characters) carry no line.
		if off := badByte(data); off >= 0 {
			line = lineAt(data, off)
		}
	}
	return &Error{Source: source, Line: line, Msg: "yaml: " + problem, Err: err}
}

// lineAt returns the 1-based line of byte offset off in data.
func lineAt(data []byte, off int) int {
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// badByte returns the offset of the first invalid UTF-8 sequence or
// character YAML does not allow in a stream, or -1.
func badByte(data []byte) int {
	for off := 0; off < len(data); {
		r, size := utf8.DecodeRune(data[off:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return off
		case r == '\t' || r == '\n' || r == '\r' || r == 0x85:
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0xfffe || r == 0xffff:
			return off
		}
		off += size
	}
	return -1
}

// decode overlays the YAML document in data onto cfg. It reports unknown
// keys, duplicate keys and type mismatches, and returns the line of every key
// path present in the file (list items as "path[i]").
func decode(cfg *Config, data []byte, source string) (map[string]int, error) {
	lines := map[string]int{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF { // empty file or comments only
			return lines, nil
		}
		return nil, syntaxError(err, data, source)
	}
	// Later documents are an error unless they are empty ("---" at the end).
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, syntaxError(err, data, source)
		}
		if len(extra.Content) > 0 && !isNull(extra.Content[0]) {
			return nil, &Error{Source: source, Line: extra.Line,
				Msg: "the file holds more than one YAML document (remove the second \"---\")"}
		}
	}
	if len(doc.Content) == 0 {
		return lines, nil
	}
	root := resolve(doc.Content[0])
	if isNull(root) {
		return lines, nil
	}
	d := decoder{source: source, lines: lines}
	if root.Kind != yaml.MappingNode {
		d.errorf(root.Line, "", "the top level must be a mapping of sections (global, lock, ...), got %s", describe(root))
		return nil, joinErrors(d.errs)
	}
	d.mapping(root, reflect.ValueOf(cfg).Elem(), "")
	if len(d.errs) > 0 {
		return nil, joinErrors(d.errs)
	}
	return lines, nil
}

// decoder walks a yaml.Node tree against the Config struct.
type decoder struct {
	source string
	lines  map[string]int
	errs   []error
}

func (d *decoder) errorf(line int, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{Source: d.source, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// typeError reports a value of the wrong YAML type.
func (d *decoder) typeError(line int, path, want string, n *yaml.Node) {
	hint := ""
	switch {
	case want == "a string" && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null":
		hint = " (quote the value to make it a string)"
	case want == "a string" && n.ShortTag() == "!!null":
		hint = ` (write "" for an empty string)`
	case want == "a boolean" && n.Kind == yaml.ScalarNode:
		hint = " (use true or false)"
	}
	d.errorf(line, path, "%s: expected %s, got %s%s", path, want, describe(n), hint)
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node's YAML type and value for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.DocumentNode:
		return "a document"
	case yaml.AliasNode:
		return "an alias"
	}
	switch tag := n.ShortTag(); tag {
	case "!!str":
		return "string " + strconv.Quote(n.Value)
	case "!!int":
		return "integer " + n.Value
	case "!!float":
		return "float " + n.Value
	case "!!bool":
		return "boolean " + n.Value
	case "!!null":
		return "null"
	case "!!timestamp":
		return "timestamp " + n.Value
	case "!!binary":
		return "binary data"
	default:
		return fmt.Sprintf("%s-tagged value %q", tag, n.Value)
	}
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// yamlName returns the key of a struct field from its yaml tag.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

// mapping decodes a YAML mapping into the struct v.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	known := make([]string, 0, t.NumField())
	index := make(map[string]int, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		name := yamlName(t.Field(i))
		known = append(known, name)
		index[name] = i
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolve(n.Content[i]), n.Content[i+1]
		keyLine := n.Content[i].Line
		if k.Kind != yaml.ScalarNode {
			d.errorf(keyLine, path, "%s: keys must be plain names, got %s as a key", orTop(path), describe(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			d.errorf(keyLine, path, "%s: YAML merge keys (<<) are not supported; write the keys out", orTop(path))
			continue
		}
		full := joinPath(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.errorf(keyLine, full, "duplicate key %q (already defined at line %d)", full, first)
			continue
		}
		seen[k.Value] = keyLine
		fi, ok := index[k.Value]
		if !ok {
			msg := fmt.Sprintf("unknown key %q (known keys: %s)", full, strings.Join(known, ", "))
			if s := suggest(k.Value, known); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			d.errorf(keyLine, full, "%s", msg)
			continue
		}
		d.lines[full] = keyLine
		d.value(val, keyLine, v.Field(fi), full)
	}
}

func orTop(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}

// value decodes one node into v. line is the line reported for type errors:
// the key's line, where the user wrote the key.
func (d *decoder) value(n *yaml.Node, line int, v reflect.Value, path string) {
	n = resolve(n)
	switch v.Kind() {
	case reflect.Struct:
		if isNull(n) { // "section:" with nothing under it keeps the defaults
			return
		}
		if n.Kind != yaml.MappingNode {
			d.typeError(line, path, "a mapping", n)
			return
		}
		d.mapping(n, v, path)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			panic("config: unsupported slice type " + v.Type().String())
		}
		if isNull(n) {
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.typeError(line, path, "a list", n)
			return
		}
		var out []string // nil when empty, like Default
		ok := true
		for i, item := range n.Content {
			ip := fmt.Sprintf("%s[%d]", path, i)
			d.lines[ip] = item.Line
			it := resolve(item)
			if it.Kind != yaml.ScalarNode || it.ShortTag() != "!!str" {
				d.typeError(item.Line, ip, "a string", it)
				ok = false
				continue
			}
			out = append(out, it.Value)
		}
		if ok {
			v.Set(reflect.ValueOf(out))
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			d.typeError(line, path, "a boolean", n)
			return
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			d.typeError(line, path, "a boolean", n)
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" && intLikeRE.MatchString(n.Value) {
				d.errorf(line, path, "%s: integer %s is out of range", path, n.Value)
				return
			}
			d.typeError(line, path, "an integer", n)
			return
		}
		var i int64
		if err := n.Decode(&i); err != nil || v.OverflowInt(i) {
			d.errorf(line, path, "%s: integer %s is out of range", path, n.Value)
			return
		}
		v.SetInt(i)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			d.typeError(line, path, "a string", n)
			return
		}
		v.SetString(n.Value)
	default:
		panic("config: unsupported field kind " + v.Kind().String())
	}
}

// intLikeRE matches integers too large for int64, which yaml.v3 resolves as
// floats.
var intLikeRE = regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`)

// suggest returns the known key closest to name, or "" if none is close.
func suggest(name string, known []string) string {
	norm := strings.ToLower(strings.ReplaceAll(name, "-", "_"))
	best, bestDist := "", 3
	for _, k := range known {
		if k == norm {
			return k
		}
		if dist := levenshtein(norm, k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	return best
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
