package models

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"
)

// AuditActionRideCreated is the audit action recorded with every new ride.
const AuditActionRideCreated = "ride.created"

// AuditRecord is a trail of who did what from where, kept for security reviews and for
// reconstructing a request after the fact.
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
	Action       string
	Data         json.RawMessage
	OriginIP     netip.Addr
	ResourceID   int64
	ResourceType string
	UserID       int64
}

// AuditRecordInsert writes an audit record.
func AuditRecordInsert(ctx context.Context, db DBTX, params AuditRecordInsertParams) (*AuditRecord, error) {
	var r AuditRecord
	err := db.QueryRow(ctx, `
		INSERT INTO audit_records (action, data, origin_ip, resource_id, resource_type, user_id)
		VALUES ($1, $2, $3, $4, $5, $6)
		RETURNING id, action, created_at, data, origin_ip, resource_id, resource_type, user_id`,
		params.Action, params.Data, params.OriginIP, params.ResourceID, params.ResourceType,
		params.UserID).Scan(&r.ID, &r.Action, &r.CreatedAt, &r.Data, &r.OriginIP, &r.ResourceID,
		&r.ResourceType, &r.UserID)
	if err != nil {
		return nil, fmt.Errorf("error inserting audit record: %w", err)
	}
	return &r, nil
}
