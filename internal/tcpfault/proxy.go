// Package tcpfault is a TCP proxy for tests that sits between a client and
// a server (Postgres) and can drop every connection, blackhole traffic like
// a network partition, or add latency.
package tcpfault

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu          sync.Mutex
	conns       map[net.Conn]struct{}
	partitioned bool
	latency     time.Duration
	wake        chan struct{} // closed when the partition heals
	closed      bool
	wg          sync.WaitGroup
	// toClient counts the bytes forwarded from the target to clients.
	toClient atomic.Int64
}

// Start listens on a free local port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, wake: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// DropAll closes every open connection, as a database restart or a load
// balancer failover does; new connections still work.
func (p *Proxy) DropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Partition stops (true) or resumes (false) all traffic without closing
// anything: bytes wait, as across a broken network, and new connections
// hang until the partition heals.
func (p *Proxy) Partition(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on == p.partitioned {
		return
	}
	p.partitioned = on
	if !on {
		close(p.wake)
		p.wake = make(chan struct{})
	}
}

// BytesToClients is how many bytes the proxy has forwarded from the target
// to its clients, over every connection.
func (p *Proxy) BytesToClients() int64 { return p.toClient.Load() }

// SetLatency delays every chunk of data by d in each direction.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.partitioned {
		p.partitioned = false
		close(p.wake)
		p.wake = make(chan struct{})
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.DropAll()
	p.wg.Wait()
	return err
}

// gate blocks while partitioned and returns the latency to apply, or false
// when the proxy closed.
func (p *Proxy) gate() (time.Duration, bool) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return 0, false
		}
		if !p.partitioned {
			d := p.latency
			p.mu.Unlock()
			return d, true
		}
		wake := p.wake
		p.mu.Unlock()
		<-wake
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	p.track(client, true)
	defer p.track(client, false)
	defer client.Close()
	if _, ok := p.gate(); !ok {
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	p.track(server, true)
	defer p.track(server, false)
	defer server.Close()
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client, nil); done <- struct{}{} }()
	go func() { p.pipe(client, server, &p.toClient); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst chunk by chunk, honouring partitions and latency,
// and adds the bytes written to counted when set.
func (p *Proxy) pipe(dst, src net.Conn, counted *atomic.Int64) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			d, ok := p.gate()
			if !ok {
				return
			}
			if d > 0 {
				time.Sleep(d)
			}
			w, werr := dst.Write(buf[:n])
			if counted != nil {
				counted.Add(int64(w))
			}
			if werr != nil {
				return
			}
		}
		if err != nil { // EOF or a closed connection: either way, done
			return
		}
	}
}
