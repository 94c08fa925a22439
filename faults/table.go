//go:build faults

package faults

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Row is one scenario's result in the printed table.
type Row struct {
	Scenario string
	Lost     string        // acknowledged writes / messages lost, per workload
	Doubled  string        // values handed out twice, firings run twice, duplicate tokens
	Hung     int           // processes that did not end by their deadline
	Recovery time.Duration // fault end → every workload acknowledged again (max)
	// NotRecovered: some workload acknowledged nothing between the fault's
	// end and its own end (Recovery is then that whole time).
	NotRecovered bool
	Verdict      string // "ok", or which invariant failed
}

var (
	tableMu sync.Mutex
	table   []Row
)

func record(r Row) {
	tableMu.Lock()
	table = append(table, r)
	tableMu.Unlock()
}

// printTable writes the table in Markdown, scenarios in run order.
func printTable(w io.Writer) {
	tableMu.Lock()
	defer tableMu.Unlock()
	if len(table) == 0 {
		return
	}
	fmt.Fprintln(w, "| scenario | lost | doubled | hung | recovery | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range table {
		rec := "-"
		if r.Recovery > 0 {
			rec = fmt.Sprintf("%.1f s", r.Recovery.Seconds())
		}
		if r.NotRecovered {
			rec = fmt.Sprintf("not within %.0f s", r.Recovery.Seconds())
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s |\n", r.Scenario, r.Lost, r.Doubled, r.Hung, rec, r.Verdict)
	}
}

// counts renders name=value pairs in a stable order.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []string
	for _, k := range keys {
		b = append(b, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(b, ", ")
}
