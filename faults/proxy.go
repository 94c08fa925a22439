//go:build faults

package faults

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Mode is what the proxy does to the bytes it carries.
type Mode int

const (
	Pass      Mode = iota // forward at once
	Latency               // hold each chunk for the proxy's delay, each direction
	Blackhole             // accept and read, forward nothing, answer nothing
)

// Proxy is a TCP proxy on a free loopback port in front of one target,
// with faults switched at run time. It is deliberately small (the unit
// tests' proxy is internal/faultproxy).
type Proxy struct {
	Addr   string
	target string
	ln     net.Listener

	mu    sync.Mutex
	mode  Mode
	delay time.Duration
	conns map[net.Conn]struct{}
}

// StartProxy listens on 127.0.0.1 and forwards to target; it is closed at
// the test's end.
func StartProxy(t testing.TB, target string) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faults: proxy listen: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Set switches the mode (delay is used by Latency).
func (p *Proxy) Set(m Mode, delay time.Duration) {
	p.mu.Lock()
	p.mode, p.delay = m, delay
	p.mu.Unlock()
}

// Reset closes every connection the proxy carries with a TCP RST; new
// connections are accepted as before.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // close sends RST
		}
		c.Close()
	}
}

// Close stops the proxy and drops every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Reset()
}

func (p *Proxy) state() (Mode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay
}

func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	defer func() {
		p.track(client, false)
		p.track(server, false)
		client.Close()
		server.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst chunk by chunk, applying the mode at each chunk:
// a blackholed chunk is dropped (the peer never hears of it).
func (p *Proxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			switch mode, delay := p.state(); mode {
			case Blackhole:
				continue
			case Latency:
				time.Sleep(delay)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
