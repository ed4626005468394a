package phases

import (
	"context"

	"github.com/rocketrides/rocketrides/models"
)

// createRideRecord is the phase from started to ride_created: it inserts the ride and its audit
// record. Nothing outside the database happens here, so it shares the atomic phase of the key's
// upsert and of the charge's preparation.
func (e *Executor) createRideRecord(_ context.Context, tx *phaseTx, r *run, params RideParams) (PhaseAction, error) {
	key := r.key
	keyID := key.ID
	r.ride = &models.Ride{
		ID:               models.NewID(),
		IdempotencyKeyID: &keyID,
		OriginLat:        params.OriginLat,
		OriginLon:        params.OriginLon,
		TargetLat:        params.TargetLat,
		TargetLon:        params.TargetLon,
		UserID:           key.UserID,
	}
	models.RideInsert(&tx.Writes, r.ride)

	models.AuditRecordInsert(&tx.Writes, models.AuditRecordInsertParams{
		ID:           models.NewID(),
		Action:       models.AuditActionRideCreated,
		Data:         key.RequestParams,
		OriginIP:     r.req.originIP,
		ResourceID:   r.ride.ID,
		ResourceType: "ride",
		UserID:       key.UserID,
	})

	return SetRecoveryPoint{Name: models.RecoveryPointRideCreated}, nil
}
