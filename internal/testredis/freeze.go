package testredis

import (
	"sync"
	"syscall"
)

// Freeze stops the server with SIGSTOP: it keeps its port and the kernel
// keeps accepting connections, but nothing is answered (a hung Redis).
// thaw resumes it (SIGCONT); it is also called when the test ends, and may
// be called more than once.
func (s *Server) Freeze() (thaw func()) {
	s.t.Helper()
	if s.cmd == nil || s.cmd.Process == nil {
		s.t.Fatalf("%s is not running", s)
	}
	pid := s.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		s.t.Fatalf("SIGSTOP %s: %v", s, err)
	}
	var once sync.Once
	thaw = func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	s.t.Cleanup(thaw)
	return thaw
}
