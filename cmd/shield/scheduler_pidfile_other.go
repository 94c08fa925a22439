//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package main

import (
	"errors"
	"syscall"
)

// The scheduler node's pidfile needs POSIX record locks and signals: on
// other systems `shield scheduler` says so.

var errNoNode = errors.New("shield scheduler start|stop|restart|status needs Linux or a BSD (POSIX locks on the pidfile)")

type pidLock struct{ stale int }

type errNodeRunning struct {
	pid  int
	path string
}

func (e errNodeRunning) Error() string { return "a scheduler node is already running" }

func lockPidfile(string) (*pidLock, error) { return nil, errNoNode }

func (*pidLock) release() {}

func nodeStatus(string) (int, bool, error) { return 0, false, errNoNode }

func signalNode(int) error { return errNoNode }

func detachAttrs() *syscall.SysProcAttr { return nil }
