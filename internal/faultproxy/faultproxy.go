// Package faultproxy is a TCP proxy for fault tests: it forwards loopback
// connections to a target (a redis-server) and can, at any moment, delay
// what it forwards, stop answering while still accepting and reading
// (a blackhole: the peer sees a server that never replies, as behind a
// dropped route), or reset every connection. Tests and the fault suite use
// it in front of real servers; it never mocks a protocol.
//
//	p, err := faultproxy.Start("127.0.0.1:6379")
//	defer p.Close()
//	client := redis.NewClient(&redis.Options{Addr: p.Addr()})
//	p.Blackhole(true)  // from now on nothing comes back
//	p.Blackhole(false) // connections opened meanwhile stay dead; new ones work
//	p.SetLatency(200 * time.Millisecond)
//	p.Reset()          // RST every open connection
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards TCP connections from Addr to a target. Its methods are
// safe for concurrent use.
type Proxy struct {
	l      net.Listener
	target string

	mu        sync.Mutex
	latency   time.Duration
	blackhole bool
	conns     map[net.Conn]struct{} // both ends of every open pair
	closed    bool
	wg        sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target (host:port).
func Start(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the host:port clients connect to.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// SetLatency delays every chunk forwarded, in both directions, by d (0: none).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Blackhole switches the blackhole on or off. While on, the proxy still
// accepts connections and reads what clients send, but forwards nothing in
// either direction and drops what it read: requests are never answered and
// no connection is closed. Connections that carried traffic while it was on
// have lost bytes, so they stay dead when it is switched off (as a TCP
// connection would after a long enough partition); new ones work.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	p.blackhole = on
	p.mu.Unlock()
}

// Reset closes every open connection with a TCP RST (both sides see
// "connection reset by peer"); new connections are accepted as usual.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.l.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects c to the target and copies both ways until either ends.
// In a blackhole it does not even dial the target: the client's connect
// succeeds and its requests vanish.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	if !p.track(c) {
		return
	}
	var t net.Conn
	if !p.isBlackhole() {
		var err error
		if t, err = net.DialTimeout("tcp", p.target, 5*time.Second); err != nil {
			p.drop(c)
			return
		}
		if !p.track(t) {
			p.drop(c)
			return
		}
	}
	done := make(chan struct{}, 2)
	go func() { p.pipe(t, c); done <- struct{}{} }()
	if t != nil {
		go func() { p.pipe(c, t); done <- struct{}{} }()
		<-done
	}
	<-done
	p.drop(c)
	if t != nil {
		p.drop(t)
	}
}

// pipe copies from src to dst (nil: nowhere) chunk by chunk, applying the
// latency and blackhole at each chunk.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			lat, hole := p.latency, p.blackhole
			p.mu.Unlock()
			if lat > 0 {
				time.Sleep(lat)
			}
			if !hole && dst != nil {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if dst != nil && errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite() // the other direction goes on until it ends too
				}
			}
			return
		}
	}
}

func (p *Proxy) isBlackhole() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blackhole
}

// track registers c for Reset and Close; false (c closed) once closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}
