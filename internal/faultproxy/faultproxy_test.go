package faultproxy

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// echo starts a line echo server for the proxy to forward to.
func echo(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, wait time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	return strings.TrimSpace(line), err
}

func TestForwardBlackholeReset(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, "hello", 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	p.Blackhole(true)
	if got, err := roundTrip(c, r, "lost", 300*time.Millisecond); err == nil {
		t.Fatalf("blackhole answered %q", got)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("blackhole: %v; want a timeout (no answer, no close)", err)
	}
	// A new connection is accepted but never answered.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("blackhole refused a connection: %v", err)
	}
	defer c2.Close()
	if _, err := roundTrip(c2, bufio.NewReader(c2), "lost", 300*time.Millisecond); err == nil {
		t.Fatal("blackhole answered a new connection")
	}

	p.Blackhole(false)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	r3 := bufio.NewReader(c3)
	if got, err := roundTrip(c3, r3, "back", 5*time.Second); err != nil || got != "back" {
		t.Fatalf("after the blackhole: %q, %v", got, err)
	}

	p.SetLatency(100 * time.Millisecond)
	start := time.Now()
	if got, err := roundTrip(c3, r3, "slow", 5*time.Second); err != nil || got != "slow" {
		t.Fatalf("with latency: %q, %v", got, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("round trip with 100ms each way took %v", d)
	}
	p.SetLatency(0)

	p.Reset()
	if _, err := roundTrip(c3, r3, "gone", 5*time.Second); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("after Reset: %v; want the connection closed", err)
	}
}
