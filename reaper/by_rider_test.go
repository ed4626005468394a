package reaper

import (
	"context"
	"slices"
	"testing"

	"github.com/rocketrides/rocketrides/models"
)

// On Citus the reaper locks keys rider by rider and clears what names them itself
// (models.IdempotencyKeyListReapableByRider, IdempotencyKeyClearReferences). Both run on a
// single Postgres too, which is where this tests them: the same keys as the one-statement lock,
// and the references cleared as the foreign keys would.
func TestReapByRider(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	old := b.request(t, b.Rider, false, "73 hours")
	other := b.request(t, b.DecliningRider, true, "74 hours")
	young := b.request(t, b.Rider, false, "1 hour")

	ids := func(keys []*models.IdempotencyKey) []int64 {
		var ids []int64
		for _, k := range keys {
			ids = append(ids, k.ID)
		}
		slices.Sort(ids)
		return ids
	}
	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	byRider, err := models.IdempotencyKeyListReapableByRider(ctx, tx, models.IdempotencyKeyRetention, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{old.ID, other.ID}
	slices.Sort(want)
	if got := ids(byRider); !slices.Equal(got, want) {
		t.Fatalf("want keys %v (not the young %d), got %v", want, young.ID, got)
	}

	if err := models.IdempotencyKeyClearReferences(ctx, tx, byRider); err != nil {
		t.Fatal(err)
	}
	var named int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM rides WHERE idempotency_key_id = ANY($1)`, want).Scan(&named); err != nil {
		t.Fatal(err)
	}
	if named != 0 {
		t.Fatalf("want no ride naming the reaped keys, got %d", named)
	}
}
