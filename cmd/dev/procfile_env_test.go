package main

import (
	"bytes"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// TestEnvExampleIsDevEnv: .env.example is what dev -env writes on the defaults, so the two never
// drift apart.
func TestEnvExampleIsDevEnv(t *testing.T) {
	t.Parallel()
	var want bytes.Buffer
	if err := writeProcfileEnv(&want, api.PortDefault, false); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../.env.example")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		t.Fatal(".env.example differs from what dev -env writes: run go run ./cmd/dev -env > .env.example")
	}
}

// TestEnvPortsFollowPORT: every port of the Procfile path's .env moves with PORT, -ha's
// formation included; and on the defaults, every one lies below the ports that tests draw
// (supervisor.FreePort), so that a test never takes a port the docs document.
func TestEnvPortsFollowPORT(t *testing.T) {
	t.Parallel()
	for _, base := range []int{api.PortDefault, 6004, 30004} {
		for _, ha := range []bool{false, true} {
			env := envPorts(t, base, ha)
			want := map[string][]int{
				"PORT": {base}, "API_URL": {base},
				"DATABASE_URL":   {base + 601},
				"STRIPE_API_URL": {base + 700},
			}
			if ha {
				want["DATABASE_URL"] = []int{base + 601, base + 602}
			}
			for name, ports := range want {
				if got := env[name]; !slices.Equal(got, ports) {
					t.Errorf("PORT=%d (ha %t): %s has ports %v, want %v", base, ha, name, got, ports)
				}
			}
			var buf bytes.Buffer
			_ = writeProcfileEnv(&buf, base, ha)
			databaseURL := envValue(buf.String(), "DATABASE_URL")
			if port, _, err := dbOnlyTarget(databaseURL, base, ha); err != nil || (ha && port != base+600) || (!ha && port != base+601) {
				t.Errorf("PORT=%d (ha %t): -db-only serves %s on port %d (%v)", base, ha, databaseURL, port, err)
			}
			if got, _, _ := dbOnlyTarget("", base, ha); ha && got != base+600 || !ha && got != base+601 {
				t.Errorf("PORT=%d (ha %t): -db-only with DATABASE_URL unset serves port %d, not .env's", base, ha, got)
			}
		}
	}
	// The defaults: the Procfile's processes (PORT+100 i, i < 6, and the API's metrics at +50),
	// the database (-ha: +600 to +602) and the stand-in.
	if highest := api.PortDefault + procfileStripeOffset; highest >= supervisor.LowestFreePort {
		t.Errorf("the documented ports reach %d, among the ports tests draw from %d", highest, supervisor.LowestFreePort)
	}
}

// envPorts returns the ports that each variable of dev -env's output names.
func envPorts(t *testing.T, base int, ha bool) map[string][]int {
	t.Helper()
	var buf bytes.Buffer
	if err := writeProcfileEnv(&buf, base, ha); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	ports := map[string][]int{}
	port, err := strconv.Atoi(envValue(out, "PORT"))
	if err != nil {
		t.Fatal(err)
	}
	ports["PORT"] = []int{port}
	for _, name := range []string{"API_URL", "STRIPE_API_URL"} {
		u, err := url.Parse(envValue(out, name))
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(u.Port())
		ports[name] = []int{p}
	}
	config, err := pgconn.ParseConfig(envValue(out, "DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	ports["DATABASE_URL"] = []int{int(config.Port)}
	for _, fallback := range config.Fallbacks {
		ports["DATABASE_URL"] = append(ports["DATABASE_URL"], int(fallback.Port))
	}
	return ports
}

// envValue returns the value of name in an .env file's text.
func envValue(text, name string) string {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			return v
		}
	}
	return ""
}
