package shieldglobal

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// Spec output formats (SpecOptions.Format; `shield test --output`).
const (
	SpecHuman = "human" // one line per test, a summary per file and a total (the default)
	SpecTAP   = "tap"   // Test Anything Protocol, version 13, one stream for every file
	SpecJUnit = "junit" // JUnit XML: one <testsuite> per file, written at the end
)

// specSink receives the results of a run and writes them in one format.
type specSink interface {
	// lines is where shield.spec writes its own report lines (nil: discard).
	lines() io.Writer
	file(path string)
	result(kind, name, text string, took time.Duration)
	// fileFailed reports a file that could not run (syntax error, ...).
	fileFailed(path, text string)
	// late reports a task spawned by test name that raised after the test
	// was reported.
	late(name, text string)
	endFile(path string, r SpecResult)
	end(total SpecResult)
}

func newSpecSink(format string, out io.Writer) (specSink, error) {
	switch format {
	case "", SpecHuman:
		return &humanSink{out: out}, nil
	case SpecTAP:
		return &tapSink{out: out}, nil
	case SpecJUnit:
		return &junitSink{out: out}, nil
	}
	return nil, fmt.Errorf("unknown spec output %q (known: human, tap, junit)", format)
}

func summary(r SpecResult) string {
	line := fmt.Sprintf("%d passed, %d failed", r.Passed, r.Failed)
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

func (h *humanSink) lines() io.Writer                             { return h.out }
func (h *humanSink) file(path string)                             { fmt.Fprintf(h.out, "# %s\n", path) }
func (h *humanSink) result(string, string, string, time.Duration) {}
func (h *humanSink) fileFailed(path, text string) {
	fmt.Fprintf(h.out, "FAIL - %s\n    %s\n", path, indent(text))
}
func (h *humanSink) late(name, text string) {
	fmt.Fprintf(h.out, "FAIL - %s\n    %s\n", name, indent(lateText+text))
}
func (h *humanSink) endFile(_ string, r SpecResult) { fmt.Fprintln(h.out, summary(r)) }
func (h *humanSink) end(total SpecResult)           { fmt.Fprintln(h.out, summary(total)) }

// tapSink writes TAP 13 as results arrive; the plan comes last.
type tapSink struct {
	out io.Writer
	n   int
}

func (t *tapSink) lines() io.Writer { return nil }
func (t *tapSink) file(path string) {
	if t.n == 0 {
		fmt.Fprintln(t.out, "TAP version 13")
	}
	fmt.Fprintf(t.out, "# %s\n", path)
}

func (t *tapSink) result(kind, name, text string, _ time.Duration) {
	t.n++
	switch kind {
	case "ok":
		fmt.Fprintf(t.out, "ok %d - %s\n", t.n, name)
	case "pending":
		fmt.Fprintf(t.out, "ok %d - %s # SKIP %s\n", t.n, name, firstLine(text))
	default:
		fmt.Fprintf(t.out, "not ok %d - %s\n", t.n, name)
		if text != "" {
			fmt.Fprintf(t.out, "  ---\n  message: |\n    %s\n  ...\n", strings.ReplaceAll(text, "\n", "\n    "))
		}
	}
}

func (t *tapSink) fileFailed(path, text string) { t.result("fail", path, text, 0) }
func (t *tapSink) late(name, text string)       { t.result("fail", name, lateText+text, 0) }
func (t *tapSink) endFile(string, SpecResult)   {}
func (t *tapSink) end(total SpecResult) {
	if t.n == 0 {
		fmt.Fprintln(t.out, "TAP version 13")
	}
	fmt.Fprintf(t.out, "1..%d\n", t.n)
	if total.Interrupted {
		fmt.Fprintln(t.out, "Bail out! interrupted")
	}
}

// junitSink collects every result and writes one JUnit XML document at the
// end (the elements and attributes the JUnit schema requires: testsuites,
// testsuite name/tests/failures/errors/skipped/time, testcase
// name/classname/time, failure message/type, skipped).
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
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
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
func (j *junitSink) file(path string) {
	if j.start.IsZero() {
		j.start = time.Now()
	}
	j.suites = append(j.suites, junitSuite{Name: path, Timestamp: time.Now().UTC().Format("2006-01-02T15:04:05"), begun: time.Now()})
}

func (j *junitSink) result(kind, name, text string, took time.Duration) {
	s := &j.suites[len(j.suites)-1]
	c := junitCase{Name: name, Classname: s.Name, Time: seconds(took)}
	switch kind {
	case "pending":
		c.Skipped = &junitSkipped{Message: firstLine(text)}
	case "fail":
		c.Failure = &junitFailure{Message: firstLine(text), Type: "failure", Text: text}
	}
	s.Cases = append(s.Cases, c)
}

func (j *junitSink) fileFailed(path, text string) { j.result("fail", path, text, 0) }

// late turns the test's case into a failure.
func (j *junitSink) late(name, text string) {
	s := &j.suites[len(j.suites)-1]
	for i := range s.Cases {
		if c := &s.Cases[i]; c.Name == name && c.Failure == nil {
			c.Failure = &junitFailure{Message: firstLine(lateText + text), Type: "failure", Text: lateText + text}
			return
		}
	}
	j.result("fail", name, lateText+text, 0)
}

func (j *junitSink) endFile(_ string, r SpecResult) {
	s := &j.suites[len(j.suites)-1]
	s.Tests, s.Failures, s.Skipped = len(s.Cases), r.Failed, r.Skipped
	s.Time = seconds(time.Since(s.begun))
}

func (j *junitSink) end(total SpecResult) {
	doc := junitSuites{Name: "shield test", Failures: total.Failed, Skipped: total.Skipped, Suites: j.suites,
		Time: seconds(time.Since(j.start))}
	for _, s := range j.suites {
		doc.Tests += s.Tests
	}
	io.WriteString(j.out, xml.Header)
	enc := xml.NewEncoder(j.out)
	enc.Indent("", "  ")
	_ = enc.Encode(doc)
	fmt.Fprintln(j.out)
}

const lateText = "a task spawned by this test failed after it ended: "

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
