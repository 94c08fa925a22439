package lock

import (
	"strconv"
	"strings"
)

// Owner identifies who holds a lock: a task of a process. Its string form,
// what backends store, is "node_id:service_id:thread_id".
type Owner struct {
	// NodeID names the process's node (global.node_id). It may contain ':'
	// ("eu:west"): owner strings are parsed from the right.
	NodeID string
	// ServiceID is global.service_id.
	ServiceID int64
	// Thread names the task within the process ("coroutine-<instance>-<n>",
	// or "main-<instance>" outside any task). It contains no ':'.
	Thread string

	s string // the string form ParseOwner read (compare owners by String)
}

// String returns "node_id:service_id:thread_id".
func (o Owner) String() string {
	if o.s != "" {
		return o.s
	}
	return o.NodeID + ":" + strconv.FormatInt(o.ServiceID, 10) + ":" + o.Thread
}

// ParseOwner reads an owner string from the right: the thread id after the
// last ':', an integer service id before it, and everything left of that
// (colons included) as the node id. ok is false for a string of another
// form (a lock taken by some other client); o.NodeID is then the whole
// string. The result keeps s, so String returns it without allocating.
func ParseOwner(s string) (o Owner, ok bool) {
	last := strings.LastIndexByte(s, ':')
	if last < 0 {
		return Owner{NodeID: s, s: s}, false
	}
	mid := strings.LastIndexByte(s[:last], ':')
	if mid < 0 {
		return Owner{NodeID: s, s: s}, false
	}
	id, err := strconv.ParseInt(s[mid+1:last], 10, 64)
	if err != nil {
		return Owner{NodeID: s, s: s}, false
	}
	return Owner{NodeID: s[:mid], ServiceID: id, Thread: s[last+1:], s: s}, true
}
