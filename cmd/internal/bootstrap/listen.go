package bootstrap

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// Listen listens on addr, which the variable setting gave (PORT, METRICS_ADDR, ...). A port that
// another process holds fails with one line that names the setting to change: under a Procfile
// manager, which stops every process when one exits, that line is the one to find among the
// others' goodbyes.
func Listen(setting, addr string) (net.Listener, error) {
	listener, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s: %s is in use by another process: set %s to a free port", setting, addr, setting)
	}
	if err != nil {
		return nil, fmt.Errorf("error listening on %s (%s): %w", addr, setting, err)
	}
	return listener, nil
}
