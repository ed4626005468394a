// Package race tells whether this binary was built with the race detector, so that the
// commands it builds and starts (see supervisor.Build) are built the same way: the most
// concurrent code of the project runs in those processes, and a test run with -race should check
// it for races as well. It also finds the race detector's reports in a process's output, which
// the harness turns into failures.
package race
