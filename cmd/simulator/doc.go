// Command simulator books random rides through the real API, as a stream of riders would, with
// the retrying client. With SIMULATE_ERRORS=true some rides ask for raise_error: their retries
// keep failing, the client gives up with the outcome unknown, and the completer finishes them
// once they look abandoned.
//
//	API_URL=http://localhost:5004 go run ./cmd/simulator [-rides N] [-interval 1s] [-riders 10]
//
// It rides as -riders new riders in turn, so that each books a few rides a minute, within the
// API's limits; with SIMULATOR_TOKEN set, as that one rider. Over a limit, the client waits as the
// API's Retry-After says, and tries again with the same key.
//
// API_URL defaults to http://localhost:$PORT. No Procfile runs it, so that an operator's stack
// books nothing by itself; `foreman run -- bin/simulator` runs it with .env's API_URL.
package main
