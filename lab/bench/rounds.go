package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
)

// With -rounds N and a baseline, the comparison then runs the API and the baseline N more times
// each at the most clients, in turns: A B, B A, A B... One run of each cannot tell a change of
// under about a fifth from the order of the runs (docs/performance.md, "With tracing off"): the
// first of two runs on the cluster books fewer rides at more CPU a ride than the second, with the
// same binary. In turns, each build runs first as often as second, and each pair's ratios show
// how far one pair's word goes.

// roundPair is one round: a run of the API and one of the baseline, one right after the other.
type roundPair struct {
	api, baseline *measurement
	apiFirst      bool
}

// runRounds runs rep.opts.rounds rounds in placement p.
func runRounds(ctx context.Context, rep *report, p placement, apis map[string]*apiTarget, say func(string, ...any)) error {
	b := rep.opts.baseline
	if b == nil || rep.opts.rounds == 0 {
		return nil
	}
	counts := rep.clientCounts()
	clients := counts[len(counts)-1]
	for i := range rep.opts.rounds {
		pair := roundPair{apiFirst: i%2 == 0}
		order := []string{targetAPI, b.target()}
		if !pair.apiFirst {
			order = []string{b.target(), targetAPI}
		}
		for _, target := range order {
			say("round %d of %d: running %s at %d %s for %s", i+1, rep.opts.rounds, target, clients, plural(clients, "client"), rep.opts.duration)
			m, err := apis[target].run(ctx, clients, rep.opts.duration)
			if err != nil {
				return fmt.Errorf("error running %s in round %d (%s): %w", target, i+1, p, err)
			}
			m.target, m.clients, m.placement = target, clients, p
			if target == targetAPI {
				pair.api = m
			} else {
				pair.baseline = m
			}
		}
		rep.rounds = append(rep.rounds, pair)
	}
	return nil
}

// roundRatios are a pair's figures, the API's over the baseline's.
type roundRatios struct {
	ridesPerSecond, cpuPerRide float64
}

func (pair roundPair) ratios() roundRatios {
	perRide := func(m *measurement) float64 { return float64(m.cpu.api) / float64(max(m.rides, 1)) }
	return roundRatios{
		ridesPerSecond: pair.api.ridesPerSecond / pair.baseline.ridesPerSecond,
		cpuPerRide:     perRide(pair.api) / perRide(pair.baseline),
	}
}

// geometricMean is the mean of ratios that treats a ratio and its inverse alike.
func geometricMean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(xs)))
}

// printRounds prints each round's ratios, then their geometric mean and range, by placement.
func (r *report) printRounds(w io.Writer) {
	if len(r.rounds) == 0 {
		return
	}
	fmt.Fprintf(w, "\nRounds: the API and %s in turns at %d clients, the API's figures over the baseline's\n", r.opts.baseline.target(), r.rounds[0].api.clients)
	fmt.Fprintf(w, "  %-10s %-6s %-16s %10s %14s\n", "placement", "round", "first", "rides/s", "API CPU/ride")
	for _, p := range r.placements {
		var rides, cpu []float64
		n := 0
		for _, pair := range r.rounds {
			if pair.api.placement != p {
				continue
			}
			n++
			first := r.opts.baseline.target()
			if pair.apiFirst {
				first = targetAPI
			}
			rr := pair.ratios()
			rides, cpu = append(rides, rr.ridesPerSecond), append(cpu, rr.cpuPerRide)
			fmt.Fprintf(w, "  %-10s %-6d %-16s %10.2f %14.2f\n", p, n, first, rr.ridesPerSecond, rr.cpuPerRide)
		}
		if n == 0 {
			continue
		}
		fmt.Fprintf(w, "  %-10s %-23s %10.2f %14.2f\n", p, "geometric mean", geometricMean(rides), geometricMean(cpu))
		fmt.Fprintf(w, "  %-10s %-23s %4.2f-%4.2f %8.2f-%4.2f\n", p, "range", slices.Min(rides), slices.Max(rides), slices.Min(cpu), slices.Max(cpu))
	}
}
