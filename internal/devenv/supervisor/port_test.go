package supervisor

import (
	"net"
	"strconv"
	"testing"
)

// A port that FreePort found free can be taken a moment later by another program (another test
// run on the machine draws from the same range), so each test draws a few times: a FreePort that
// returned ports in use would fail every draw.
const draws = 5

func TestFreePort(t *testing.T) {
	t.Parallel()
	var err error
	for range draws {
		var port int
		if port, err = FreePort(); err != nil {
			t.Fatal(err)
		}
		if port < LowestFreePort || port >= ephemeralStart() {
			t.Fatalf("want a port from %d up to the kernel's range at %d, got %d", LowestFreePort, ephemeralStart(), port)
		}
		if err = listenEach(port, nil); err == nil {
			return
		}
	}
	t.Fatalf("want the port drawn free to listen on, %d draws: %v", draws, err)
}

func TestFreePortBlock(t *testing.T) {
	t.Parallel()
	offsets := []int{50, 100, 700}
	var err error
	for range draws {
		var base int
		if base, err = FreePortBlock(offsets...); err != nil {
			t.Fatal(err)
		}
		if base < LowestFreePort || base+700 >= ephemeralStart() {
			t.Fatalf("want the block from %d up to the kernel's range at %d, got %d to %d", LowestFreePort, ephemeralStart(), base, base+700)
		}
		// Each port by a listener of the test's own, not allFree, so that a FreePortBlock
		// that checked fewer ports than it was given fails here.
		if err = listenEach(base, offsets); err == nil {
			return
		}
	}
	t.Fatalf("want the block drawn free to listen on, %d draws: %v", draws, err)
}

// listenEach listens on base and on each port at one of offsets above it, in turn.
func listenEach(base int, offsets []int) error {
	for _, offset := range append(offsets, 0) {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(base+offset))
		if err != nil {
			return err
		}
		l.Close()
	}
	return nil
}

// A port drawn for a process that has not bound it yet looks free to the next draw; FreePort
// never hands it out twice. A thousand draws from the 12,768 ports below Linux's default
// ephemeral range repeat one about 39 times without that memory.
func TestFreePortNeverHandsOutAPortTwice(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for range 1000 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}
