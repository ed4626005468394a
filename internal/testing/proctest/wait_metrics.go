package proctest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// WaitMetrics scrapes url, p's /metrics endpoint, until every series of want (named as
// MetricValue names them) has its value, and returns the exposition text of that scrape. It
// fails the test, listing what differed, if that takes longer than timeout or p exits first. A
// background process counts as it works, so a test waits for its figures rather than read them
// once.
func WaitMetrics(t testing.TB, p *Process, url string, want map[string]float64, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if p.Exited() {
			t.Fatalf("%s exited while the test waited for its metrics:\n%s", p.Name, p.Output())
		}
		text := Scrape(t, url)
		var wrong []string
		for _, series := range slices.Sorted(maps.Keys(want)) {
			got, ok := MetricValue(text, series)
			if !ok || got != want[series] {
				wrong = append(wrong, fmt.Sprintf("%s = %v (present %t), want %v", series, got, ok, want[series]))
			}
		}
		if len(wrong) == 0 {
			return text
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics of %s not as wanted within %s:\n%s\n\nlast scrape:\n%s", p.Name, timeout, strings.Join(wrong, "\n"), text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
