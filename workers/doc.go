// Package workers holds the River workers of Rocket Rides: the background jobs that the API
// stages in staged_jobs and the enqueuer hands to River. One file per job kind, each with its
// worker; the args of every kind live in the leaf package jobargs, which the API and the
// enqueuer share.
//
// # Receipts: at least once, normally exactly once
//
// In normal operation a ride gets one receipt: the job is unique per ride, and the receipt is
// recorded (rides.receipt_sent_at) in the same transaction that completes the job, so a job that
// finds the receipt recorded sends nothing.
//
// Sending is still at least once, because the mail server and Postgres cannot share a
// transaction. Between the moment the mail server has the whole message and the commit of that
// transaction, the job can end without the receipt recorded, and its retry mails the rider
// again. What keeps that window short:
//
//   - The job takes its database connection before it sends and keeps it until the commit, so
//     recording never waits for a connection from a pool that other jobs have emptied meanwhile.
//     (PoolMaxConns sizes the pool to the worker's concurrency and some; a starved pool holds a
//     job up before it sends, which is harmless.)
//   - Once the message's last line has gone to the server, neither the job's cancellation (a
//     shutdown's hard stop) nor its timeout aborts the send: the mailer waits for the server's
//     verdict within its own SendTimeout (30 s), and recording ignores the cancellation too,
//     within RecordTimeout.
//
// What remains:
//
//   - The process dies, or loses the database, after the server accepted the message and before
//     the commit: usually the milliseconds of one UPDATE and one commit. River rescues the job,
//     still marked running, after RescueStuckJobsAfter (an hour by default) and mails again. A
//     shutdown whose hard stop cannot wait for a stalled server's verdict (the process
//     manager's SIGKILL comes first) ends the same way.
//   - The server's final reply is lost (the connection drops, or SendTimeout passes, after the
//     message's last line went out): the send fails, the job is retried, and the server may have
//     delivered the first copy all the same.
//
// Every copy carries the same Message-ID, derived from the ride (ReceiptMessageID), so a mail
// system that deduplicates on it (many providers and clients do) shows one.
//
// # Counting receipts
//
// rocketrides_receipts_total is counted from two places, each the only one that knows its part:
//
//   - sent and logged by the worker itself (SendRideReceiptWorker.Work), once the receipt is
//     recorded: only the worker knows that a message went out, and whether to a mail server or
//     to the log. A completed job that sent nothing (its receipt was recorded already) is not
//     counted.
//   - failed, discarded and cancelled by CountFailures, from River's events, which carry the
//     state River wrote for the attempt. River alone decides between failed and discarded
//     (attempts left, an error handler), and a job interrupted by a shutdown is neither: it goes
//     back to available without using up an attempt. Counting in Work would have to guess all
//     that again.
//
// rocketrides_receipt_latency_seconds runs from the booking to the mail server's acceptance:
// from when the job was staged (the start of the ride's last atomic phase, which the enqueuer
// carries in the job's metadata, see package stagedat) to the job's fetch, both read off the
// database's clock, plus the time since Work began, read off this process's. No skew between the
// two clocks enters it; the moment between the fetch and Work's start, a millisecond or so, is
// left out. For a retried job the fetch is the last attempt's, and the retries' waits count.
package workers
