package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// lastWordsOfUnexpectedExits finds, in the processes' log, each process that exited by itself
// without having crashed at a fault point, and returns up to n of its lines before the exit: the
// log is gone with the test's temporary directory, and its tail rarely reaches back that far.
func lastWordsOfUnexpectedExits(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out strings.Builder
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		_, note, ok := strings.Cut(line, "| ")
		label, _, exited := strings.Cut(note[min(len(note), len("15:04:05.000 ")):], " exited by itself")
		if !ok || !strings.HasPrefix(line, "chaos ") || !exited || strings.Contains(label, " ") {
			continue
		}
		var own []string
		for j := i - 1; j >= 0 && len(own) < n; j-- {
			if l, _, _ := strings.Cut(lines[j], "|"); strings.TrimSpace(l) == label {
				own = append(own, lines[j])
			}
		}
		if len(own) > 0 && strings.Contains(own[0], `msg="Faults: crashing"`) {
			continue
		}
		slices.Reverse(own)
		fmt.Fprintf(&out, "%s\n%s\n", line, strings.Join(own, "\n"))
	}
	return out.String()
}

// tail returns the last lines of the file at path, or why it could not read it.
func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}
