package faults

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rocketrides/rocketrides/phases"
)

var points = []phases.FaultPoint{
	phases.FaultPointRideCreated, phases.FaultPointChargeAnswered, phases.FaultPointFinished,
	phases.FaultPointCancelClaimed, phases.FaultPointRefundAnswered,
}

// rule is what to do at one point.
type rule struct {
	crash       bool
	stall       time.Duration
	probability float64
}

// Injector implements phases.FaultInjector.
type Injector struct {
	logger *slog.Logger
	rules  map[phases.FaultPoint]rule

	// kill ends the process; tests replace it.
	kill func()
}

// Parse reads a FAULTS specification. An empty one returns nil: no injector at all.
func Parse(spec string, logger *slog.Logger) (*Injector, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	inj := &Injector{logger: logger, rules: map[phases.FaultPoint]rule{}, kill: killSelf}
	for _, item := range strings.Split(spec, ",") {
		pointText, actionText, ok := strings.Cut(strings.TrimSpace(item), "=")
		point := phases.FaultPoint(pointText)
		if !ok || !slices.Contains(points, point) {
			return nil, fmt.Errorf("FAULTS: %q is not point=action with a point among %v", item, points)
		}
		r := rule{probability: 1}
		if action, p, ok := strings.Cut(actionText, "@"); ok {
			prob, err := strconv.ParseFloat(p, 64)
			if err != nil || prob <= 0 || prob > 1 {
				return nil, fmt.Errorf("FAULTS: %q: the probability after @ must be in (0, 1]", item)
			}
			r.probability, actionText = prob, action
		}
		switch {
		case actionText == "crash":
			r.crash = true
		case strings.HasPrefix(actionText, "stall:"):
			d, err := time.ParseDuration(strings.TrimPrefix(actionText, "stall:"))
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("FAULTS: %q: stall takes a positive duration, as in stall:5s", item)
			}
			r.stall = d
		default:
			return nil, fmt.Errorf("FAULTS: %q: the action must be crash or stall:<duration>", item)
		}
		inj.rules[point] = r
	}
	return inj, nil
}

// At acts on the rule for point, if there is one and the dice say so.
func (i *Injector) At(ctx context.Context, point phases.FaultPoint) {
	r, ok := i.rules[point]
	if !ok || rand.Float64() >= r.probability {
		return
	}
	if r.crash {
		i.logger.WarnContext(ctx, "Faults: crashing", slog.String("point", string(point)))
		i.kill()
		return
	}
	i.logger.WarnContext(ctx, "Faults: stalling", slog.String("point", string(point)), slog.Duration("for", r.stall))
	time.Sleep(r.stall) // deliberately deaf to ctx: a frozen process notices nothing
}

// killSelf dies the way a crash does: no deferred functions, no graceful shutdown.
func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not instant; never return into the request
}
