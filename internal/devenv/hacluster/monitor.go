package hacluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// TunedSettings are the monitor's failover timing with Config.Tuned, against pg_auto_failover's
// defaults. The monitor checks every node each health_check_period, and calls a primary lost
// once it has failed node_considered_unhealthy_timeout of checks and keeper reports; then it
// waits primary_demote_timeout for the old primary to demote itself before promoting the
// standby. By default those add up to about 50 s; tuned, about 6 s. Shorter still risks a
// failover for a primary that was only slow (a checkpoint, a loaded machine), each of which costs
// every client its connections. docs/high-availability.md gives the figures measured with both.
var TunedSettings = map[string]string{
	"pgautofailover.health_check_period":               "1000", // ms; default 5000
	"pgautofailover.health_check_timeout":              "1000", // ms; default 5000
	"pgautofailover.health_check_max_retries":          "1",    // default 2
	"pgautofailover.health_check_retry_delay":          "500",  // ms; default 2000
	"pgautofailover.node_considered_unhealthy_timeout": "3000", // ms; default 20000
	"pgautofailover.primary_demote_timeout":            "3000", // ms; default 30000
}

// The keepers' network_partition_timeout, in seconds: how long a primary that cannot reach the
// monitor nor its standby keeps taking writes before it demotes itself. Tuned, it demotes before
// the monitor promotes the standby (primary_demote_timeout), so two primaries never take writes.
const (
	keeperPartitionTimeoutDefault = 20
	keeperPartitionTimeoutTuned   = 2
)

// monitorNodeURL is the monitor's URL for the keepers, which register as autoctl_node.
func (f *Formation) monitorNodeURL() string {
	return fmt.Sprintf("postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable", f.monitor.port)
}

// queryMonitor runs fn on a connection of its own to the monitor.
func (f *Formation) queryMonitor(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.MonitorURL()+"&connect_timeout=2")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(conn)
}

// waitMonitor waits until the monitor accepts connections.
func (f *Formation) waitMonitor(ctx context.Context) error {
	return f.poll(ctx, "the monitor to accept connections", func(ctx context.Context) (bool, error) {
		return f.queryMonitor(ctx, func(*pgx.Conn) error { return nil }) == nil, nil
	})
}

// setMonitorTiming applies TunedSettings, or puts pg_auto_failover's defaults back.
func (f *Formation) setMonitorTiming(ctx context.Context, tuned bool) error {
	return f.queryMonitor(ctx, func(conn *pgx.Conn) error {
		for _, name := range slices.Sorted(maps.Keys(TunedSettings)) {
			sql := "ALTER SYSTEM RESET " + name
			if tuned {
				sql = fmt.Sprintf("ALTER SYSTEM SET %s = %s", name, TunedSettings[name])
			}
			if _, err := conn.Exec(ctx, sql); err != nil {
				return fmt.Errorf("error setting the monitor's %s: %w", name, err)
			}
		}
		_, err := conn.Exec(ctx, "SELECT pg_reload_conf()")
		return err
	})
}

// NodeState is a data node's state as the monitor has it.
type NodeState struct {
	Name          string
	ReportedState string // what the node's keeper last reported: primary, secondary, wait_primary, …
	GoalState     string // what the monitor wants it to become
}

// States returns the data nodes' states, by node name.
func (f *Formation) States(ctx context.Context) ([]NodeState, error) {
	var states []NodeState
	err := f.queryMonitor(ctx, func(conn *pgx.Conn) error {
		rows, _ := conn.Query(ctx, `
			SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node ORDER BY nodename`)
		var err error
		states, err = pgx.CollectRows(rows, pgx.RowToStructByPos[NodeState])
		return err
	})
	return states, err
}

// WaitHealthy waits until one node is primary and the other its secondary, both as the monitor
// wants them: the formation can lose either and lose no acknowledged commit.
func (f *Formation) WaitHealthy(ctx context.Context) error {
	return f.poll(ctx, "a primary and a secondary", func(ctx context.Context) (bool, error) {
		states, err := f.States(ctx)
		if err != nil || len(states) != 2 {
			return false, nil
		}
		roles := []string{}
		for _, s := range states {
			if s.ReportedState != s.GoalState {
				return false, nil
			}
			roles = append(roles, s.ReportedState)
		}
		slices.Sort(roles)
		return slices.Equal(roles, []string{"primary", "secondary"}), nil
	})
}

// waitRegistered waits until the monitor has heard from n's keeper in a state where it serves:
// the first node as the primary (single, until a standby joins), the second as its standby.
func (f *Formation) waitRegistered(ctx context.Context, n *node) error {
	return f.poll(ctx, n.name+" to join", func(ctx context.Context) (bool, error) {
		states, err := f.States(ctx)
		if err != nil {
			return false, nil
		}
		for _, s := range states {
			if s.Name == n.name && s.ReportedState == s.GoalState &&
				slices.Contains([]string{"single", "primary", "wait_primary", "secondary"}, s.ReportedState) {
				return true, nil
			}
		}
		return false, nil
	})
}

// writable are the states in which a node takes writes.
var writable = []string{"single", "primary", "wait_primary"}

// Primary returns the index of the node that takes writes, as the monitor has it, or -1.
func (f *Formation) Primary(ctx context.Context) (int, error) {
	states, err := f.States(ctx)
	if err != nil {
		return -1, err
	}
	for _, s := range states {
		if s.ReportedState == s.GoalState && slices.Contains(writable, s.ReportedState) {
			return f.index(s.Name), nil
		}
	}
	return -1, nil
}

// WaitPromoted waits until node i takes writes.
func (f *Formation) WaitPromoted(ctx context.Context, i int) error {
	return f.poll(ctx, f.nodes[i].name+" to be promoted", func(ctx context.Context) (bool, error) {
		primary, err := f.Primary(ctx)
		return err == nil && primary == i, nil
	})
}

func (f *Formation) index(name string) int {
	for i, n := range f.nodes {
		if n.name == name {
			return i
		}
	}
	return -1
}

// poll calls done every 100 ms until it reports true, returns an error, or ctx ends.
func (f *Formation) poll(ctx context.Context, what string, done func(ctx context.Context) (bool, error)) error {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		ok, err := done(ctx)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			states, _ := f.States(context.WithoutCancel(ctx))
			return fmt.Errorf("gave up waiting for %s (%w); the monitor has %s", what, ctx.Err(), describe(states))
		case <-ticker.C:
		}
	}
}

func describe(states []NodeState) string {
	if len(states) == 0 {
		return "no nodes"
	}
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = fmt.Sprintf("%s %s (goal %s)", s.Name, s.ReportedState, s.GoalState)
	}
	return strings.Join(parts, ", ")
}
