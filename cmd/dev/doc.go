// Command dev runs the whole Rocket Rides service on one machine with nothing but Go and the
// PostgreSQL server binaries installed:
//
//	go run ./cmd/dev            # throwaway state, gone on exit
//	go run ./cmd/dev -persist   # state kept in .data between runs
//	go run ./cmd/dev -data-dir DIR
//	go run ./cmd/dev -db-only   # only PostgreSQL, migrated and kept in .data, for a Procfile manager
//	go run ./cmd/dev -traces    # and Jaeger, which every process sends its traces to
//
// It starts a PostgreSQL cluster, migrates it, starts the Stripe stand-in, creates two demo
// riders (one whose card works, one whose card is declined), and runs the API, worker,
// enqueuer, completer, reaper and River's UI (admin ui) as separate processes, the way a
// Procfile manager would, with their output prefixed by name. Ctrl-C stops all of it and leaves
// no process behind. Kept state
// is the database and the Stripe stand-in's customers and charges, together: the database's
// riders are the stand-in's customers.
package main
