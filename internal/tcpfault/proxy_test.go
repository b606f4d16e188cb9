package tcpfault

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestBytesToClientsCountsWhatTheTargetSent: the bytes the target writes
// reach the client and are counted; the client's own bytes are not.
func TestBytesToClientsCountsWhatTheTargetSent(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err == nil {
			_, _ = c.Write([]byte("a reply of 21 bytes.."))
		}
	}()
	p, err := Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "a reply of 21 bytes.." {
		t.Fatalf("read %q, %v", got, err)
	}
	if n := p.BytesToClients(); n != 21 {
		t.Fatalf("BytesToClients = %d, want 21", n)
	}
}
