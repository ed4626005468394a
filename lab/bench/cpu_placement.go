package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// placement is where a comparison's processes run.
type placement string

const (
	// placementShared runs every process on every CPU the bench may use, as on one machine
	// that holds the whole deployment.
	placementShared placement = "shared"
	// placementPinned runs Postgres on CPUs of its own and everything else on the others, as
	// in a deployment where the API runs on machines of its own and the database is the bound.
	placementPinned placement = "pinned"
)

// pinMode is -pin: off (shared only, the default), on (pinned only), or both (a shared run and
// then a pinned one, in the same run on the same cluster).
type pinMode string

const (
	pinOff  pinMode = ""
	pinOn   pinMode = "on"
	pinBoth pinMode = "both"
)

func (p *pinMode) String() string { return string(*p) }

// IsBoolFlag lets -pin stand alone for -pin=on.
func (p *pinMode) IsBoolFlag() bool { return true }

func (p *pinMode) Set(s string) error {
	switch s {
	case "true", "on":
		*p = pinOn
	case "false", "off":
		*p = pinOff
	case "both":
		*p = pinBoth
	default:
		return fmt.Errorf("want on, off or both, not %q", s)
	}
	return nil
}

// placements are the placements a comparison runs in, in order.
func (p pinMode) placements() []placement {
	switch p {
	case pinOn:
		return []placement{placementPinned}
	case pinBoth:
		return []placement{placementShared, placementPinned}
	}
	return []placement{placementShared}
}

// cpuSplit is how -pin splits the CPUs the bench may use: Postgres on the upper half, the rest on
// the lower (on 2 CPUs, Postgres on CPU 1 and the rest on CPU 0).
type cpuSplit struct {
	procDir             string
	all, postgres, rest unix.CPUSet
}

// newCPUSplit splits the CPUs this process may use, which must be at least 2.
func newCPUSplit() (*cpuSplit, error) {
	s := &cpuSplit{procDir: "/proc"}
	if err := unix.SchedGetaffinity(0, &s.all); err != nil {
		return nil, fmt.Errorf("error reading the CPUs this process may use: %w", err)
	}
	cpus := cpusOf(&s.all)
	if len(cpus) < 2 {
		return nil, fmt.Errorf("-pin needs at least 2 CPUs to split, and this process may use %d", len(cpus))
	}
	half := len(cpus) / 2
	for _, cpu := range cpus[:half] {
		s.rest.Set(cpu)
	}
	for _, cpu := range cpus[half:] {
		s.postgres.Set(cpu)
	}
	return s, nil
}

// place puts Postgres (the postmaster and every process it forked) and the rest (this process
// and the stand-in) where p says. The processes started later, Postgres's backends and the API
// and pgbench, inherit their parent's CPUs.
func (s *cpuSplit) place(p placement, postmaster, standIn int) error {
	postgres, rest := &s.all, &s.all
	if p == placementPinned {
		postgres, rest = &s.postgres, &s.rest
	}
	if err := setProcessAffinity(s.procDir, os.Getpid(), rest); err != nil {
		return err
	}
	if err := setTreeAffinity(s.procDir, standIn, rest); err != nil {
		return err
	}
	return setTreeAffinity(s.procDir, postmaster, postgres)
}

// describe says where p puts the processes.
func (s *cpuSplit) describe(p placement) string {
	if p == placementPinned {
		return fmt.Sprintf("Postgres on %s; the API, the load generators, the stand-in and the bench on %s",
			describeCPUs(&s.postgres), describeCPUs(&s.rest))
	}
	return "every process on " + describeCPUs(&s.all)
}

// describeCPUs names the CPUs in set: "CPU 1", "CPUs 0-1".
func describeCPUs(set *unix.CPUSet) string {
	cpus := cpusOf(set)
	return plural(len(cpus), "CPU") + " " + formatCPUs(cpus)
}

// setTreeAffinity sets the CPUs of root and of every process descended from it.
func setTreeAffinity(procDir string, root int, set *unix.CPUSet) error {
	tree, err := descendants(procDir, root)
	if err != nil {
		return err
	}
	if err := setProcessAffinity(procDir, root, set); err != nil {
		return err
	}
	for _, p := range tree {
		if err := setProcessAffinity(procDir, p.pid, set); err != nil {
			return err
		}
	}
	return nil
}

// setProcessAffinity sets the CPUs of every thread of process pid. It lists the threads again
// until it finds none it has not set: a thread that one not yet set starts meanwhile gets the
// CPUs of its creator. A process that exits meanwhile is left alone.
func setProcessAffinity(procDir string, pid int, set *unix.CPUSet) error {
	done := map[int]bool{}
	for {
		entries, err := os.ReadDir(filepath.Join(procDir, strconv.Itoa(pid), "task"))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("error listing the threads of process %d: %w", pid, err)
		}
		fresh := false
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("error setting the CPUs of process %d: %w", pid, err)
			}
			done[tid], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
}

// readCPUs reads the CPUs process pid may run on, as /proc/<pid>/status lists them ("0-1").
func readCPUs(procDir string, pid int) (string, error) {
	status, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "status"))
	if err != nil {
		return "", fmt.Errorf("error reading the CPUs of process %d: %w", pid, err)
	}
	for line := range strings.Lines(string(status)) {
		if value, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(value), nil
		}
	}
	return "", fmt.Errorf("error reading the CPUs of process %d: no Cpus_allowed_list", pid)
}

// cpusOf lists the CPUs in set, in increasing order.
func cpusOf(set *unix.CPUSet) []int {
	var cpus []int
	for cpu := 0; len(cpus) < set.Count(); cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}

// formatCPUs lists cpus, increasing, as the kernel does: runs of consecutive CPUs as ranges.
func formatCPUs(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i])+"-"+strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
