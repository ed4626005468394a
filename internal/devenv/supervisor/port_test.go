package supervisor

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePort(t *testing.T) {
	t.Parallel()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if port < LowestFreePort || port >= ephemeralStart() {
		t.Errorf("want a port from %d up to the kernel's range at %d, got %d", LowestFreePort, ephemeralStart(), port)
	}
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("want port %d free to listen on: %v", port, err)
	}
	l.Close()
}

func TestFreePortBlock(t *testing.T) {
	t.Parallel()
	offsets := []int{50, 100, 700}
	base, err := FreePortBlock(offsets...)
	if err != nil {
		t.Fatal(err)
	}
	if base < LowestFreePort || base+700 >= ephemeralStart() {
		t.Errorf("want the block from %d up to the kernel's range at %d, got %d to %d", LowestFreePort, ephemeralStart(), base, base+700)
	}
	for _, offset := range append(offsets, 0) {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(base+offset))
		if err != nil {
			t.Fatalf("want port %d free to listen on: %v", base+offset, err)
		}
		l.Close()
	}
}
