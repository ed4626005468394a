// Command bench measures the ride API, in one of several modes.
//
// By default it is a load generator for a running API. Concurrent clients book rides with the
// public retrying client (package client), each under a fresh Idempotency-Key, and, with
// -replay-share, send a share of their earlier keys again, whose answers must come back as
// replays of the first. It then prints what it saw: requests, rides booked, replays, refusals,
// unknown outcomes, 409 answers, throughput, and the latency of whole client calls, retries
// included.
//
//	go run ./lab/bench -api http://localhost:5004 -token rr_... -clients 16 -duration 30s [-replay-share 0.2]
//
// With -compare it needs nothing running: it starts a durable Postgres cluster of its own, the
// Stripe stand-in and the API, and compares the API's rides per second and latency with two
// pgbench references on the same cluster in the same run, the article's four transactions per
// ride and the same work in two, and prints one table and the ratios (see compare.go). For each
// run it also prints the CPU time a ride cost each process, from /proc: the API, Postgres (the
// postmaster it started and every process forked from it, exited ones included), the load
// generator (pgbench, or the bench itself for the API) and the Stripe stand-in, which runs as
// cmd/fakestripe; and the API's allocations a ride, from its Go runtime's metrics (see
// cpu_meter.go). With -pin, Postgres runs on half the CPUs (CPU 1 of 2) and everything else on
// the others, as when the API has machines of its own and the database is the bound; -pin=both
// runs the whole comparison shared and then pinned, and prints the ratios of each side by side
// (see cpu_placement.go). With -baseline REV, a fourth target, "API at <short REV>", is cmd/api
// as built from git revision REV of this repository in a temporary worktree, run right after the
// API at each number of clients, alike in every other way; the ratios then add the API's CPU,
// allocations and rides per second over the baseline's (see baseline.go). The first of two runs
// on the cluster fares worse than the second, with the same binary: -baseline-first runs the
// baseline before the API instead, and -rounds N adds N runs of each in turns, each pair's
// ratios printed with their geometric mean and range (see rounds.go).
//
//	go run ./lab/bench -compare [-rides 300000 -riders 1000 -clients 32 -duration 30s -solo-duration 10s] [-pin | -pin=both] [-baseline REV [-baseline-first] [-rounds N]]
//
// With -compare-citus it needs nothing running but Citus installed for the Postgres it finds
// (docs/scale-out.md): it runs the API and the twotx reference at -clients clients on a single
// durable Postgres and then on a durable Citus cluster, a coordinator and two workers, each side
// on databases with the same history, and prints both sides' rides per second and latency, each
// side's API ÷ twotx and Citus ÷ plain (see compare_citus.go). The three nodes share this
// machine's CPUs with the API and the clients: the figures say what Citus costs on one machine,
// not what it gains on many. On Citus, pgbench cannot retry a serialization failure that a
// worker found at COMMIT, which Citus reports as XX000; each client it aborts so is replaced,
// and the rides lost so are counted (see pgbench_citus.go).
//
//	go run ./lab/bench -compare-citus [-rides 300000 -riders 1000 -clients 32 -duration 30s]
//
// With -receipts it needs nothing running either: it starts a durable cluster, the Stripe
// stand-in, an SMTP server and the Procfile's processes, books -bookings rides one after
// another, and prints how long each receipt took from the rider's 201 to the mail server, whole
// and stage by stage; then, unless -idle is 0, what the idle stack costs the database in
// statements per second, process by process (see receipts.go).
//
//	go run ./lab/bench -receipts [-bookings 40 -idle 60s]
//
// A receipt's stages, each from a timestamp that is stored or seen: staged (the start of the
// transaction of the ride's last atomic phase, staged_jobs.created_at, which the enqueuer carries
// into the River job's metadata, see jobargs.StagedAtKey); enqueuing (the start of the enqueuer's
// batch, river_job.created_at); fetched (river_job.attempted_at); accepted (when the SMTP server
// here accepted the message). The Stripe stand-in answers at once unless -stripe-latency says
// otherwise; with -stripe-latency 50ms bookings come about 60 ms apart, the pace at which a
// receipt could miss the enqueuer's notification before its cooldown was shortened.
//
// Exit status: 0 when every call ended in a booked ride, a refusal (402) or the replay of its
// first answer; 1 when any ended with an unknown outcome, an unexpected error, or a replay that
// differs from the first answer (a different ride id, say), or when -compare, -compare-citus or
// -receipts could not run (a receipt that never reached the mail server, or Citus not installed,
// say); 2 on bad usage.
package main
