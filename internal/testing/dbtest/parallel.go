package dbtest

import (
	"flag"
	"strconv"
)

// MinParallel is how many tests of a package Main runs at once at the least, unless -parallel
// says otherwise. Go's default is GOMAXPROCS, two on a small machine, which suits tests that
// compute. These mostly wait: on Postgres, on the processes they started, on the timeouts and
// Retry-After delays they play out. Two at a time left such a machine idle for most of a run
// (internal/testing/e2etest took 50 s at -parallel 2, 18 s at 8, on 2 cores).
const MinParallel = 8

// raiseParallel sets -test.parallel to MinParallel if the command line left it at a lower
// default. It runs before m.Run, which reads the flag.
func raiseParallel() {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.parallel")
	if f == nil {
		return
	}
	explicit := false
	flag.Visit(func(set *flag.Flag) { explicit = explicit || set == f })
	if n, err := strconv.Atoi(f.Value.String()); explicit || err != nil || n >= MinParallel {
		return
	}
	_ = f.Value.Set(strconv.Itoa(MinParallel)) // a valid int: cannot fail
}
