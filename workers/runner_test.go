package workers

import "testing"

func TestPoolMaxConns(t *testing.T) {
	t.Parallel()
	if got := PoolMaxConns(10); got < 10+2 {
		t.Fatalf("want room for 10 jobs and River, got %d", got)
	}
}
