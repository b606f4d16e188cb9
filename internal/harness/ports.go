package harness

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
)

// FreeAddr finds a free TCP port on 127.0.0.1 for a server started later (a
// child process, a restarted Postgres). The port lies below Linux's
// ephemeral range (32768 and up), where listeners on port 0 and outgoing
// connections take theirs, so nothing else takes it meanwhile; and no port
// is handed out twice in one program.
func FreeAddr() (*net.TCPAddr, error) {
	freePorts.Lock()
	defer freePorts.Unlock()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if freePorts.given[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		freePorts.given[port] = true
		return l.Addr().(*net.TCPAddr), nil
	}
	return nil, errors.New("no free port in 20000-31999")
}

var freePorts = struct {
	sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}
