package supervisor

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Ports that FreePort draws from: from LowestFreePort up to just below the kernel's ephemeral range,
// which it reads from ephemeralRangeFile (Linux), or else assumes starts at
// ephemeralStartDefault (Linux's default; macOS and the BSDs start higher).
const (
	LowestFreePort        = 20000
	ephemeralStartDefault = 32768
	ephemeralRangeFile    = "/proc/sys/net/ipv4/ip_local_port_range"
)

// FreePort returns a TCP port that nobody listens on, for a process that is to listen there,
// and perhaps again after it restarts. A port the kernel picks for port 0 would do only until
// it is free again: the kernel hands the same range to every program's port-0 listener and to
// outgoing connections, and one of them can take the port between the check and the process's
// listen, or while the process restarts (an API replica of lab/chaos, restarted after a crash,
// would then exit for want of its port). So the port is drawn at random below that range, where
// the kernel never hands one out.
func FreePort() (int, error) {
	return FreePortBlock()
}

// FreePortBlock returns a port such that it and each port at one of offsets above it were free a
// moment ago, drawn as FreePort draws: for a stack whose ports all follow one setting, as the
// Procfile's follow PORT.
func FreePortBlock(offsets ...int) (int, error) {
	highest := ephemeralStart() - 1
	if len(offsets) > 0 {
		highest -= max(slices.Max(offsets), 0)
	}
	var err error
	for range 100 {
		var base int
		if highest-LowestFreePort < 1000 && len(offsets) == 0 { // a range configured to start low: use it as it is
			if base, err = kernelPort(); err != nil {
				return 0, err
			}
		} else {
			base = LowestFreePort + rand.IntN(max(highest-LowestFreePort+1, 1))
			if err = allFree(base, offsets); err != nil {
				continue
			}
		}
		if handOut(base, offsets) {
			return base, nil
		}
		err = fmt.Errorf("port %d was handed out already", base)
	}
	return 0, fmt.Errorf("error finding a free port: %w", err)
}

// handedOut are the ports that this process's draws returned. A port drawn for a process that
// has not bound it yet looks free to the next draw: cmd/dev once gave its worker and its
// completer the same metrics port, and the worker exited.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// handOut records base and each port at one of offsets above it as handed out, unless one of
// them was already; it reports whether it recorded them.
func handOut(base int, offsets []int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	ports := append([]int{base}, offsets...)
	for i := range ports[1:] {
		ports[i+1] += base
	}
	for _, p := range ports {
		if handedOut.ports[p] {
			return false
		}
	}
	for _, p := range ports {
		handedOut.ports[p] = true
	}
	return true
}

// allFree reports whether base and each port at one of offsets above it can be listened on,
// on all addresses, as the processes listen: a listener on any one of them would make theirs
// fail.
func allFree(base int, offsets []int) error {
	for _, offset := range append([]int{0}, offsets...) {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(base+offset))
		if err != nil {
			return err
		}
		l.Close()
	}
	return nil
}

// ephemeralStart returns the first port of the kernel's ephemeral range.
func ephemeralStart() int {
	b, err := os.ReadFile(ephemeralRangeFile)
	if err != nil {
		return ephemeralStartDefault
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return ephemeralStartDefault
	}
	if n, err := strconv.Atoi(fields[0]); err == nil && n > 0 {
		return n
	}
	return ephemeralStartDefault
}

// kernelPort returns a port the kernel picks.
func kernelPort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("error finding a free port: %w", err)
	}
	defer l.Close()
	tcp, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("error finding a free port: not a TCP address")
	}
	return tcp.Port, nil
}
