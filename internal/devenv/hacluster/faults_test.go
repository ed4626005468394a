package hacluster

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for a node's postmaster: run with sleeperEnv set, it
// listens on the port given after -p and waits to be killed.
func TestMain(m *testing.M) {
	if os.Getenv(sleeperEnv) != "" {
		var port string
		for i, arg := range os.Args {
			if arg == "-p" && i+1 < len(os.Args) {
				port = os.Args[i+1]
			}
		}
		if _, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port)); err != nil {
			os.Exit(2)
		}
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const sleeperEnv = "HACLUSTER_TEST_SLEEPER"

// TestKillAll kills a process found only by the data directory it runs on, as a postmaster
// forked the moment its keeper died is, and waits for its port to be silent; a process running
// on another directory, one whose path begins with this one's, lives on, and so does one that
// only names the directory.
func TestKillAll(t *testing.T) {
	dir := t.TempDir()
	pgdata := filepath.Join(dir, "node1")
	orphan, port := startSleeper(t, "-D", pgdata)
	_, neighbourPort := startSleeper(t, "-D", pgdata+"0")
	_, readerPort := startSleeper(t, "--du", pgdata)

	if err := killAll(pgdata, port, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := orphan.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the process naming %s ended with %v; want killed", pgdata, err)
	}
	// A killed process would be a zombie until reaped, which a signal still reaches; its
	// port is closed at once.
	if !portAnswers(neighbourPort) || !portAnswers(readerPort) {
		t.Fatalf("want the processes on %s0 and naming %s alive, their ports answer: %t, %t",
			pgdata, pgdata, portAnswers(neighbourPort), portAnswers(readerPort))
	}
}

// TestKillAllPortAnswers gives up, saying so, while something still answers on the node's
// port, though no process names its data directory.
func TestKillAllPortAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	err = killAll(filepath.Join(t.TempDir(), "node1"), port, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "port "+strconv.Itoa(port)+" answers: true") {
		t.Fatalf("killAll with port %d answering: %v; want an error saying so", port, err)
	}
}

// startSleeper starts the test binary with args as a stand-in postmaster, and waits until it
// answers on its port.
func startSleeper(t *testing.T, args ...string) (*exec.Cmd, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.Command(os.Args[0], append(args, "-p", strconv.Itoa(port))...)
	cmd.Env = append(os.Environ(), sleeperEnv+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); !portAnswers(port); {
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in postmaster %v never answered on port %d", args, port)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd, port
}
