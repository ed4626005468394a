package race

import "strings"

// The race detector prints each race it finds at once, between two rules, as
//
//	==================
//	WARNING: DATA RACE
//	Write at 0x00c000014108 by goroutine 7:
//	...
//	==================
//
// and the process exits with ExitStatus when it ends by itself.
const (
	reportHeader = "WARNING: DATA RACE"
	reportRule   = "=================="
)

// ExitStatus is the exit status that the race detector gives a process that found a race and
// would have exited 0 (GORACE's exitcode).
const ExitStatus = 66

// Reports returns the race reports in output, a process's output, each from its warning line to
// its closing rule (or the end of output, if the process died first). A line may carry a prefix,
// such as a Procfile manager's process name.
func Reports(output string) []string {
	var c Collector
	for line := range strings.Lines(output) {
		c.Line(strings.TrimRight(line, "\n"))
	}
	return c.Reports()
}

// Collector gathers race reports from output given line by line, as it is written. One
// Collector reads one stream: the lines of a report are consecutive there.
type Collector struct {
	reports []string
	current []string // the report being read; nil between reports
}

// Line reads one line of output, without its newline.
func (c *Collector) Line(text string) {
	switch {
	case strings.Contains(text, reportHeader):
		c.flush() // a report cut short by another
		c.current = []string{text}
	case c.current != nil:
		c.current = append(c.current, text)
		if strings.HasSuffix(text, reportRule) {
			c.flush()
		}
	}
}

// Reports returns the reports read so far, with one still being read.
func (c *Collector) Reports() []string {
	reports := c.reports
	if c.current != nil {
		reports = append(reports[:len(reports):len(reports)], strings.Join(c.current, "\n"))
	}
	return reports
}

func (c *Collector) flush() {
	if c.current != nil {
		c.reports = append(c.reports, strings.Join(c.current, "\n"))
		c.current = nil
	}
}
