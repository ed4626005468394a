package models

// RecoveryPoint names the last atomic phase a request committed. A retried request resumes from
// it instead of starting over. Package phases draws the graph the points form.
type RecoveryPoint string

// The recovery points, in the order the phases reach them. Every request starts at started and
// ends at finished. A booking (POST /rides) passes ride_created and charge_created; a cancel
// (POST /rides/{id}/cancel) passes refund_created.
const (
	RecoveryPointStarted       RecoveryPoint = "started"
	RecoveryPointRideCreated   RecoveryPoint = "ride_created"
	RecoveryPointChargeCreated RecoveryPoint = "charge_created"
	RecoveryPointRefundCreated RecoveryPoint = "refund_created"
	RecoveryPointFinished      RecoveryPoint = "finished"
)
