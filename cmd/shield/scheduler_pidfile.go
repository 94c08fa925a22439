//go:build linux || darwin || freebsd || netbsd || openbsd

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// The node's pidfile. The node holds a POSIX write lock (fcntl) on it for
// as long as it lives, so "a live node holds it" does not depend on the
// pid in the file (pids are reused): the kernel drops the lock when the
// process exits, however it exits, and F_GETLK names the holder's pid. A
// pidfile nobody holds is stale and is taken over. (POSIX locks belong to
// the process and go when it closes any descriptor of the file: the node
// opens its pidfile once, here.)

// pidLock is the node's hold on its pidfile.
type pidLock struct {
	f    *os.File
	path string
	// stale is the pid a stale pidfile held (0: there was none).
	stale int
}

// errNodeRunning is returned by lockPidfile when a live node holds it.
type errNodeRunning struct {
	pid  int
	path string
}

func (e errNodeRunning) Error() string {
	return fmt.Sprintf("a scheduler node is already running (pid %d, pidfile %s)", e.pid, e.path)
}

func wholeFile(typ int16) *syscall.Flock_t {
	return &syscall.Flock_t{Type: typ, Whence: io.SeekStart}
}

// lockPidfile takes path for this process and writes its pid there.
// Errors: errNodeRunning, or what the file system says.
func lockPidfile(path string) (*pidLock, error) {
	for range 10 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("pidfile: %w", err)
		}
		if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, wholeFile(syscall.F_WRLCK)); err != nil {
			f.Close()
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
				pid, running, _ := nodeStatus(path)
				if running {
					return nil, errNodeRunning{pid, path}
				}
				continue // it just went away
			}
			return nil, fmt.Errorf("pidfile %s: lock: %w", path, err)
		}
		// A node that was stopping may have removed the file between our
		// open and our lock: then we hold a file nobody can find.
		held, err1 := f.Stat()
		named, err2 := os.Stat(path)
		if err1 != nil || err2 != nil || !os.SameFile(held, named) {
			f.Close()
			continue
		}
		l := &pidLock{f: f, path: path}
		if b, err := io.ReadAll(f); err == nil {
			l.stale, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, fmt.Errorf("pidfile %s: %w", path, err)
		}
		if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("pidfile %s: %w", path, err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("pidfile %s: it keeps changing under us (another node starting and stopping?)", path)
}

// release removes the pidfile, then lets go of it.
func (l *pidLock) release() {
	os.Remove(l.path)
	l.f.Close()
}

// nodeStatus reports whether a live node holds the pidfile at path, and its
// pid. A missing pidfile is no node (no error).
func nodeStatus(path string) (pid int, running bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("pidfile: %w", err)
	}
	defer f.Close()
	lk := wholeFile(syscall.F_WRLCK)
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, lk); err != nil {
		return 0, false, fmt.Errorf("pidfile %s: %w", path, err)
	}
	if lk.Type == syscall.F_UNLCK {
		return 0, false, nil
	}
	return int(lk.Pid), true, nil
}

// signalNode sends SIGTERM to the node.
func signalNode(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }

// detachAttrs makes the detached node a session of its own, so that the
// terminal's hangup does not reach it.
func detachAttrs() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
