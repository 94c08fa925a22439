package shieldglobal

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Spec output formats (SpecOptions.Format; `shield test --output`).
const (
	SpecHuman = "human" // one line per test, a summary per file and a total (the default)
	SpecTAP   = "tap"   // Test Anything Protocol, version 13, one stream for every file
	SpecJUnit = "junit" // JUnit XML: one <testsuite> per file, written at the end
	SpecJSON  = "json"  // busted's JSON: successes, failures, errors, pendings, duration
	specList  = "list"  // --list: "file:line: name" per selected test
)

// specSink receives the results of a run and writes them in one format.
// Result kinds: "ok", "fail" (an assertion did not hold), "error" (any
// other error), "interrupted" (the test Ctrl-C stopped; counted as an
// error), "pending", "list".
type specSink interface {
	// lines is where shield.spec writes its own report lines (nil: discard).
	lines() io.Writer
	repeat(run, of int)
	file(path string)
	// result: pos is the "file:line" of the test's it() ("" if unknown).
	result(kind, name, text, pos string, took time.Duration)
	// fileFailed reports a file that could not run (syntax error, ...).
	fileFailed(path, text string)
	// late reports a task spawned by test name that raised after the test
	// was reported.
	late(name, text string)
	endFile(path string, r SpecResult)
	end(total SpecResult)
}

func newSpecSink(format string, out io.Writer) (specSink, error) {
	// busted's handler names are accepted too (-o TAP, -o utfTerminal).
	switch strings.ToLower(format) {
	case "", SpecHuman, "utfterminal", "plainterminal":
		return &humanSink{out: out}, nil
	case SpecTAP:
		return &tapSink{out: out}, nil
	case SpecJUnit:
		return &junitSink{out: out}, nil
	case SpecJSON:
		return &jsonSink{out: out, start: time.Now()}, nil
	case specList:
		return &listSink{out: out}, nil
	}
	return nil, fmt.Errorf("unknown spec output %q (known: human, tap, junit, json; busted's utfTerminal and plainTerminal are human)", format)
}

func summary(r SpecResult) string {
	line := fmt.Sprintf("%d passed, %d failed", r.Passed, r.Failed)
	if r.Errors == 1 {
		line += ", 1 error"
	} else if r.Errors > 1 {
		line += fmt.Sprintf(", %d errors", r.Errors)
	}
	if r.Skipped > 0 {
		line += fmt.Sprintf(", %d skipped", r.Skipped)
	}
	if r.Interrupted {
		line += " (interrupted)"
	}
	return line
}

// humanSink: shield.spec's own lines, a summary per file, the total last.
type humanSink struct{ out io.Writer }

func (h *humanSink) lines() io.Writer   { return h.out }
func (h *humanSink) repeat(run, of int) { fmt.Fprintf(h.out, "# run %d of %d\n", run, of) }
func (h *humanSink) file(path string)   { fmt.Fprintf(h.out, "# %s\n", path) }

// result: shield.spec wrote the line already, except for the test Ctrl-C
// interrupted, which Go reports.
func (h *humanSink) result(kind, name, _, _ string, _ time.Duration) {
	if kind == "interrupted" {
		fmt.Fprintf(h.out, "INTERRUPTED - %s\n", name)
	}
}
func (h *humanSink) fileFailed(path, text string) {
	fmt.Fprintf(h.out, "ERROR - %s\n    %s\n", path, indent(text))
}
func (h *humanSink) late(name, text string) {
	fmt.Fprintf(h.out, "ERROR - %s\n    %s\n", name, indent(lateText+text))
}
func (h *humanSink) endFile(_ string, r SpecResult) { fmt.Fprintln(h.out, summary(r)) }
func (h *humanSink) end(total SpecResult)           { fmt.Fprintln(h.out, summary(total)) }

// listSink: --list, one "file:line: name" line per selected test.
type listSink struct{ out io.Writer }

func (l *listSink) lines() io.Writer { return nil }
func (l *listSink) repeat(int, int)  {}
func (l *listSink) file(string)      {}
func (l *listSink) result(kind, name, _, pos string, _ time.Duration) {
	if kind != "list" {
		return
	}
	if pos != "" {
		fmt.Fprintf(l.out, "%s: %s\n", pos, name)
		return
	}
	fmt.Fprintln(l.out, name)
}
func (l *listSink) fileFailed(path, text string) {
	fmt.Fprintf(l.out, "ERROR - %s\n    %s\n", path, indent(text))
}
func (l *listSink) late(string, string)        {}
func (l *listSink) endFile(string, SpecResult) {}
func (l *listSink) end(SpecResult)             {}

// tapSink writes TAP 13 as results arrive; the plan comes last.
type tapSink struct {
	out io.Writer
	n   int
}

func (t *tapSink) lines() io.Writer { return nil }
func (t *tapSink) header() {
	if t.n == 0 {
		fmt.Fprintln(t.out, "TAP version 13")
		t.n = -1
	}
}
func (t *tapSink) repeat(run, of int) { t.header(); fmt.Fprintf(t.out, "# run %d of %d\n", run, of) }
func (t *tapSink) file(path string)   { t.header(); fmt.Fprintf(t.out, "# %s\n", path) }

func (t *tapSink) result(kind, name, text, pos string, _ time.Duration) {
	t.header()
	if t.n < 0 {
		t.n = 0
	}
	t.n++
	switch kind {
	case "ok":
		fmt.Fprintf(t.out, "ok %d - %s\n", t.n, name)
	case "pending":
		fmt.Fprintf(t.out, "ok %d - %s # SKIP %s\n", t.n, name, firstLine(text))
	default:
		fmt.Fprintf(t.out, "not ok %d - %s\n", t.n, name)
		severity := "error"
		if kind == "fail" {
			severity = "fail"
		}
		fmt.Fprintf(t.out, "  ---\n  severity: %s\n", severity)
		if pos != "" {
			fmt.Fprintf(t.out, "  at: %s\n", pos)
		}
		if text != "" {
			fmt.Fprintf(t.out, "  message: |\n    %s\n", strings.ReplaceAll(text, "\n", "\n    "))
		}
		fmt.Fprintln(t.out, "  ...")
	}
}

func (t *tapSink) fileFailed(path, text string) { t.result("error", path, text, "", 0) }
func (t *tapSink) late(name, text string)       { t.result("error", name, lateText+text, "", 0) }
func (t *tapSink) endFile(string, SpecResult)   {}
func (t *tapSink) end(total SpecResult) {
	t.header()
	fmt.Fprintf(t.out, "1..%d\n", max(t.n, 0))
	fmt.Fprintf(t.out, "# %s\n", summary(total))
	if total.Interrupted {
		fmt.Fprintln(t.out, "Bail out! interrupted")
	}
}

// junitSink collects every result and writes one JUnit XML document at the
// end (the elements and attributes the JUnit schema requires: testsuites,
// testsuite name/tests/failures/errors/skipped/time, testcase
// name/classname/time, failure and error message/type, skipped).
type junitSink struct {
	out    io.Writer
	suites []junitSuite
	start  time.Time
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
	begun     time.Time
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Line      string        `xml:"line,attr,omitempty"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr,omitempty"`
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

func (j *junitSink) lines() io.Writer { return nil }
func (j *junitSink) repeat(int, int)  {}
func (j *junitSink) file(path string) {
	if j.start.IsZero() {
		j.start = time.Now()
	}
	j.suites = append(j.suites, junitSuite{Name: path, Timestamp: time.Now().UTC().Format("2006-01-02T15:04:05"), begun: time.Now()})
}

func (j *junitSink) result(kind, name, text, pos string, took time.Duration) {
	s := &j.suites[len(j.suites)-1]
	c := junitCase{Name: name, Classname: s.Name, Time: seconds(took)}
	c.File, c.Line = splitPos(pos)
	switch kind {
	case "pending":
		c.Skipped = &junitSkipped{Message: firstLine(text)}
	case "fail":
		c.Failure = &junitFailure{Message: firstLine(text), Type: "failure", Text: text}
	case "error", "interrupted":
		c.Error = &junitFailure{Message: firstLine(text), Type: kind, Text: text}
	}
	s.Cases = append(s.Cases, c)
}

func (j *junitSink) fileFailed(path, text string) { j.result("error", path, text, "", 0) }

// late turns the test's case into an error.
func (j *junitSink) late(name, text string) {
	s := &j.suites[len(j.suites)-1]
	for i := range s.Cases {
		if c := &s.Cases[i]; c.Name == name && c.Failure == nil && c.Error == nil {
			c.Error = &junitFailure{Message: firstLine(lateText + text), Type: "error", Text: lateText + text}
			return
		}
	}
	j.result("error", name, lateText+text, "", 0)
}

func (j *junitSink) endFile(_ string, r SpecResult) {
	s := &j.suites[len(j.suites)-1]
	s.Tests, s.Failures, s.Errors, s.Skipped = len(s.Cases), r.Failed, r.Errors, r.Skipped
	s.Time = seconds(time.Since(s.begun))
}

func (j *junitSink) end(total SpecResult) {
	doc := junitSuites{Name: "shield test", Failures: total.Failed, Errors: total.Errors, Skipped: total.Skipped,
		Suites: j.suites, Time: seconds(time.Since(j.start))}
	for _, s := range j.suites {
		doc.Tests += s.Tests
	}
	io.WriteString(j.out, xml.Header)
	enc := xml.NewEncoder(j.out)
	enc.Indent("", "  ")
	_ = enc.Encode(doc)
	fmt.Fprintln(j.out)
}

// jsonSink writes busted's JSON document at the end: the tests in four
// lists (successes, failures, errors, pendings) and the duration in
// seconds. Each entry has the full name, the message (failures, errors,
// pending reasons), and busted's trace/element positions (short_src,
// currentline) of the test's it(), plus its own file, line and duration.
type jsonSink struct {
	out   io.Writer
	start time.Time
	file_ string
	doc   jsonDoc
	// index of each test of the current file in its list, for late()
	where map[string]*jsonTest
}

type jsonDoc struct {
	Successes []*jsonTest `json:"successes"`
	Failures  []*jsonTest `json:"failures"`
	Errors    []*jsonTest `json:"errors"`
	Pendings  []*jsonTest `json:"pendings"`
	Duration  float64     `json:"duration"`
}

type jsonTrace struct {
	ShortSrc    string `json:"short_src,omitempty"`
	CurrentLine int    `json:"currentline,omitempty"`
	Traceback   string `json:"traceback,omitempty"`
	Message     string `json:"message,omitempty"`
}

type jsonElement struct {
	Name       string    `json:"name"`
	Descriptor string    `json:"descriptor"`
	Trace      jsonTrace `json:"trace"`
}

type jsonTest struct {
	Name     string      `json:"name"`
	File     string      `json:"file"`
	Line     int         `json:"line,omitempty"`
	Message  string      `json:"message,omitempty"`
	Trace    jsonTrace   `json:"trace"`
	Element  jsonElement `json:"element"`
	Duration float64     `json:"duration"`
}

func (j *jsonSink) lines() io.Writer { return nil }
func (j *jsonSink) repeat(int, int)  {}
func (j *jsonSink) file(path string) { j.file_, j.where = path, map[string]*jsonTest{} }

func (j *jsonSink) result(kind, name, text, pos string, took time.Duration) {
	file, line := splitPos(pos)
	if file == "" {
		file = j.file_
	}
	n, _ := strconv.Atoi(line)
	msg, tb, _ := strings.Cut(text, "\nstack traceback:")
	if tb != "" {
		tb = "stack traceback:" + tb
	}
	t := &jsonTest{Name: name, File: file, Line: n, Message: msg,
		Trace:    jsonTrace{ShortSrc: file, CurrentLine: n, Traceback: tb, Message: msg},
		Element:  jsonElement{Name: name, Descriptor: "it", Trace: jsonTrace{ShortSrc: file, CurrentLine: n}},
		Duration: took.Seconds()}
	switch kind {
	case "ok":
		j.doc.Successes = append(j.doc.Successes, t)
	case "fail":
		j.doc.Failures = append(j.doc.Failures, t)
	case "error", "interrupted":
		j.doc.Errors = append(j.doc.Errors, t)
	case "pending":
		t.Element.Descriptor = "pending"
		j.doc.Pendings = append(j.doc.Pendings, t)
	}
	j.where[name] = t
}

func (j *jsonSink) fileFailed(path, text string) { j.result("error", path, text, "", 0) }

// late moves a test reported as a success to the errors.
func (j *jsonSink) late(name, text string) {
	for i, t := range j.doc.Successes {
		if t.Name == name && t == j.where[name] {
			j.doc.Successes = append(j.doc.Successes[:i], j.doc.Successes[i+1:]...)
			t.Message = lateText + text
			t.Trace.Message = t.Message
			j.doc.Errors = append(j.doc.Errors, t)
			return
		}
	}
	j.result("error", name, lateText+text, "", 0)
}

func (j *jsonSink) endFile(string, SpecResult) {}
func (j *jsonSink) end(SpecResult) {
	j.doc.Duration = time.Since(j.start).Seconds()
	for _, l := range []*[]*jsonTest{&j.doc.Successes, &j.doc.Failures, &j.doc.Errors, &j.doc.Pendings} {
		if *l == nil {
			*l = []*jsonTest{}
		}
	}
	enc := json.NewEncoder(j.out)
	enc.SetIndent("", "  ")
	_ = enc.Encode(j.doc)
}

// splitPos splits "file:line" ("" when pos is not of that form).
func splitPos(pos string) (file, line string) {
	i := strings.LastIndexByte(pos, ':')
	if i <= 0 {
		return "", ""
	}
	if _, err := strconv.Atoi(pos[i+1:]); err != nil {
		return "", ""
	}
	return pos[:i], pos[i+1:]
}

const lateText = "a task spawned by this test failed after it ended: "

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
