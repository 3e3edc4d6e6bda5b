package testenv

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on loopback in front of one backend address, for
// tests that take a backend's endpoint away and give it back: Close cuts
// every connection and refuses new ones, as a killed node does, and Start
// listens again on the same address.
type Proxy struct {
	target string
	addr   string

	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]struct{}
	accepted int
	wg       sync.WaitGroup
	// held, while not nil, stops the backend's bytes short of the clients
	// (HoldReplies) until it is closed.
	held chan struct{}
}

// HoldReplies stops passing the backend's bytes on to the clients (they
// wait in the proxy) until ReleaseReplies or Close: what a client sends
// still arrives, and its answers do not, as when a node dies after taking
// a message and before its confirm went out.
func (p *Proxy) HoldReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// ReleaseReplies passes on the backend's bytes held since HoldReplies.
func (p *Proxy) ReleaseReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// hold returns the channel to wait on before passing backend bytes on, nil
// when they pass.
func (p *Proxy) hold() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// StartProxy starts a proxy on 127.0.0.1 in front of target (host:port on
// loopback, else t fails) and closes it when t ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		t.Fatalf("proxy target %q: %v", target, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		t.Fatalf("proxy target %q is not on loopback; tests only talk to loopback", target)
	}
	p := &Proxy{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy to %s: %v", target, err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.addr }

// Accepted returns the number of connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Start listens again on the proxy's address after Close; it does nothing
// while the proxy runs.
func (p *Proxy) Start() error {
	p.mu.Lock()
	running := p.ln != nil
	p.mu.Unlock()
	if running {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// Close stops listening and closes every connection through the proxy,
// and returns when they are all closed. A closed proxy refuses
// connections until Start.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	if p.held != nil { // what was held is lost with its connections
		close(p.held)
		p.held = nil
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.accepted++
			p.mu.Unlock()
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.pipe(c)
			}()
		}
	}()
}

// track registers c, or closes it and reports false when the proxy was
// closed meanwhile.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// pipe copies between the client connection c and a new connection to the
// target until either side ends.
func (p *Proxy) pipe(c net.Conn) {
	if !p.track(c) {
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(up) {
		if up != nil && err == nil {
			_ = up.Close()
		}
		p.untrack(c)
		return
	}
	done := make(chan struct{}, 2)
	copyTo := func(dst net.Conn, src io.Reader) {
		_, err := io.Copy(dst, src)
		if err == nil || errors.Is(err, net.ErrClosed) {
			// Half-close: the other direction may still carry an answer.
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
		}
		done <- struct{}{}
	}
	go copyTo(up, c)
	go copyTo(c, &heldReader{p: p, r: up})
	<-done
	<-done
	p.untrack(c, up)
}

// heldReader reads the backend side of a connection, waiting while the
// proxy holds replies (Close releases them, and the write to the closed
// client fails).
type heldReader struct {
	p *Proxy
	r io.Reader
}

func (h *heldReader) Read(b []byte) (int, error) {
	n, err := h.r.Read(b)
	if held := h.p.hold(); held != nil && n > 0 {
		<-held
	}
	return n, err
}

// DeadAddr returns a loopback address where nothing listens: a connection
// to it is refused.
func DeadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("reserve a dead address: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
