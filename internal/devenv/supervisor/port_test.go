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
	if port < lowestPort || port >= ephemeralStart() {
		t.Errorf("want a port from %d up to the kernel's range at %d, got %d", lowestPort, ephemeralStart(), port)
	}
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("want port %d free to listen on: %v", port, err)
	}
	l.Close()
}
