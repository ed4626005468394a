// Package workers holds the River workers of Rocket Rides: the background jobs that the API
// stages in staged_jobs and the enqueuer hands to River. The two receipt jobs, the ride's and the
// refund's, share one file, receipt.go, which holds what a receipt says and how it is mailed and
// recorded: the two differ only in their words and in where they are recorded. The args of every kind live in internal/jobargs, which phases and the enqueuer
// share.
//
// A receipt is sent at least once and normally exactly once: the mail server and Postgres share
// no transaction, so a worker that dies between the server's acceptance and the commit that
// records the receipt mails it again on the job's retry, with the same Message-ID.
// docs/receipts.md says where copies can come from, how many, and how receipts are counted.
package workers
