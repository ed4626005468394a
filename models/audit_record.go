package models

import (
	"encoding/json"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// AuditActionRideCreated is the audit action recorded with every new ride.
const AuditActionRideCreated = "ride.created"

// AuditActionRideCancelled is the audit action recorded when a cancel refunded a ride.
const AuditActionRideCancelled = "ride.cancelled"

// AuditRecord says who did what from where. It is kept for security reviews and to
// reconstruct a request after the fact.
type AuditRecord struct {
	ID           int64
	Action       string
	CreatedAt    time.Time
	Data         json.RawMessage
	OriginIP     netip.Addr
	ResourceID   int64
	ResourceType string
	UserID       int64
}

// AuditRecordInsertParams are the columns of a new audit record.
type AuditRecordInsertParams struct {
	ID           int64
	Action       string
	Data         json.RawMessage
	OriginIP     netip.Addr
	ResourceID   int64
	ResourceType string
	UserID       int64
}

// AuditRecordInsert queues on batch the insert of an audit record.
func AuditRecordInsert(batch *pgx.Batch, params AuditRecordInsertParams) {
	batch.Queue(`
		INSERT INTO audit_records (id, action, data, origin_ip, resource_id, resource_type, user_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		params.ID, params.Action, params.Data, params.OriginIP, params.ResourceID,
		params.ResourceType, params.UserID,
	).Exec(func(pgconn.CommandTag) error { return nil })
}
