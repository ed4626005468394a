package phases

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/models"
)

// createRideRecord is the atomic phase from started to ride_created: it inserts the ride and its
// audit record. Nothing outside the database happens here, so everything is in one transaction.
func (e *Executor) createRideRecord(ctx context.Context, key *models.IdempotencyKey, req *CreateRideRequest) error {
	return e.atomicPhase(ctx, key, func(ctx context.Context, tx pgx.Tx, key *models.IdempotencyKey) (PhaseAction, error) {
		ride, err := models.RideInsert(ctx, tx, models.RideInsertParams{
			IdempotencyKeyID: key.ID,
			OriginLat:        req.Params.OriginLat,
			OriginLon:        req.Params.OriginLon,
			TargetLat:        req.Params.TargetLat,
			TargetLon:        req.Params.TargetLon,
			UserID:           key.UserID,
		})
		if err != nil {
			return nil, err
		}

		_, err = models.AuditRecordInsert(ctx, tx, models.AuditRecordInsertParams{
			Action:       models.AuditActionRideCreated,
			Data:         key.RequestParams,
			OriginIP:     req.OriginIP,
			ResourceID:   ride.ID,
			ResourceType: "ride",
			UserID:       key.UserID,
		})
		if err != nil {
			return nil, fmt.Errorf("error auditing ride %d: %w", ride.ID, err)
		}

		return RecoveryPoint{Name: models.RecoveryPointRideCreated}, nil
	})
}
