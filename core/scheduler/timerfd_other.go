//go:build !linux

package scheduler

import "time"

// sysAfterFunc is time.AfterFunc where there is no timerfd (see
// timerfd_linux.go).
func sysAfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
