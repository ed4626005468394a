// Package enqueuer is the transactionally-staged job drain of the article. A request stages its
// background jobs in staged_jobs, in the same transaction as the work that wants them, so that a
// job exists if and only if that work committed. The enqueuer moves committed staged jobs into
// River, in batches, each batch in one transaction that inserts the jobs into River and deletes
// exactly the staged rows it inserted: a job reaches River once, never twice and never not at
// all, however many enqueuers run.
//
// The API notifies NotifyChannel once it committed staged jobs, outside the transaction that
// staged them and coalesced (phases' stagedJobsNotifier), which wakes a started Enqueuer at once;
// polling every Config.PollInterval covers notifications missed while the listening connection
// was down, or never sent (the API died between the commit and the notification).
//
// Two kinds of staged rows stay behind. Rows of a job name the enqueuer does not know
// (Config.JobNames) are left untouched, for a release that knows them. Rows that River can never
// take are set aside: marked failed in staged_jobs, kept until a person deals with them. The
// enqueuer logs each job it sets aside, and now and then how many rows of either kind are left
// (see reportStranded).
//
// Nothing deletes a set-aside row: it may be a receipt that a rider is owed. An operator lists
// and retries it with the admin command (docs/operations.md).
package enqueuer
