// Package e2etest holds the end-to-end tests: the real binaries, each a separate process,
// against one real database, a Stripe stand-in and an SMTP server, as a Procfile would run them.
package e2etest
