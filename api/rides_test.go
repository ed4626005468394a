package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/phases/resource"
)

func TestCreateRide(t *testing.T) {
	t.Parallel()

	t.Run("CreatesThenReplays", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})

		first := b.postRide(t, b.Rider, testKey, testBody)
		body := first.rideCreated(t)
		if first.header.Get("Idempotent-Replayed") != "" {
			t.Fatal("a first answer is not a replay")
		}
		if body.Ride.OriginLat != 37.7749 || body.Ride.TargetLon != -121.8863 {
			t.Fatalf("unexpected ride %+v", body.Ride)
		}

		second := b.postRide(t, b.Rider, testKey, testBody)
		second.rideCreated(t)
		if second.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(first.body, second.body) {
			t.Fatalf("want the same body replayed with Idempotent-Replayed: true, got %q %s",
				second.header.Get("Idempotent-Replayed"), second.body)
		}
		if n := len(b.SucceededCharges()); n != 1 {
			t.Fatalf("want 1 charge, got %d", n)
		}
	})

	t.Run("AcceptsAFormBody", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		resp := b.do(t, http.MethodPost, "/rides", map[string]string{
			"Authorization":   "Bearer " + b.Rider.Token,
			"Idempotency-Key": testKey,
			"Content-Type":    "application/x-www-form-urlencoded",
		}, "origin_lat=0.0&origin_lon=0.0&target_lat=0.0&target_lon=0.0")
		resp.rideCreated(t)

		// The same request as JSON integers is the same parameters.
		replay := b.postRide(t, b.Rider, testKey, `{"origin_lat":0,"origin_lon":0,"target_lat":0,"target_lon":0}`)
		if replay.status != http.StatusCreated || replay.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("want a replay, got %d %s", replay.status, replay.body)
		}
	})

	t.Run("RejectedRequestsStoreNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		auth := "Bearer " + b.Rider.Token

		tests := []struct {
			name    string
			headers map[string]string
			body    string
			status  int
			code    problem.Code
			param   string
		}{
			{"NoAuthorization", map[string]string{"Idempotency-Key": testKey}, testBody, 401, problem.CodeUnauthorized, ""},
			{"EmptyAuthorization", map[string]string{"Authorization": "", "Idempotency-Key": testKey}, testBody, 401, problem.CodeUnauthorized, ""},
			{"UnknownToken", map[string]string{"Authorization": "Bearer rr_unknown", "Idempotency-Key": testKey}, testBody, 401, problem.CodeUnauthorized, ""},
			{"BearerAlone", map[string]string{"Authorization": "Bearer   ", "Idempotency-Key": testKey}, testBody, 401, problem.CodeUnauthorized, ""},
			{"NotBearer", map[string]string{"Authorization": "Basic " + b.Rider.Token, "Idempotency-Key": testKey}, testBody, 401, problem.CodeUnauthorized, ""},
			{"NoKey", map[string]string{"Authorization": auth}, testBody, 400, problem.CodeIdempotencyKeyMissing, ""},
			{"ShortKey", map[string]string{"Authorization": auth, "Idempotency-Key": "too-short"}, testBody, 400, problem.CodeIdempotencyKeyInvalid, ""},
			{"LongKey", map[string]string{"Authorization": auth, "Idempotency-Key": strings.Repeat("k", 256)}, testBody, 400, problem.CodeIdempotencyKeyInvalid, ""},
			{"NoParams", map[string]string{"Authorization": auth, "Idempotency-Key": testKey}, "", 400, problem.CodeInvalidParameter, "origin_lat"},
			{"BadLatitude", map[string]string{"Authorization": auth, "Idempotency-Key": testKey, "Content-Type": "application/json"},
				`{"origin_lat": 91, "origin_lon": 0, "target_lat": 0, "target_lon": 0}`, 400, problem.CodeInvalidParameter, "origin_lat"},
			{"RaiseErrorNotSimulating", map[string]string{"Authorization": auth, "Idempotency-Key": testKey, "Content-Type": "application/x-www-form-urlencoded"},
				"origin_lat=0&origin_lon=0&target_lat=0&target_lon=0&raise_error=true", 400, problem.CodeInvalidParameter, "raise_error"},
			{"BodyTooLarge", map[string]string{"Authorization": auth, "Idempotency-Key": testKey, "Content-Type": "application/json"},
				`{"origin_lat": 0, "pad": "` + strings.Repeat("x", 64<<10) + `"}`, 413, problem.CodeRequestTooLarge, ""},
			{"UnsupportedMediaType", map[string]string{"Authorization": auth, "Idempotency-Key": testKey, "Content-Type": "text/plain"},
				testBody, 415, problem.CodeUnsupportedMediaType, ""},
		}
		for _, tt := range tests {
			resp := b.do(t, http.MethodPost, "/rides", tt.headers, tt.body)
			p := resp.requireProblem(t, tt.status, tt.code)
			if p.Param != tt.param {
				t.Fatalf("%s: want param %q, got %q", tt.name, tt.param, p.Param)
			}
			if tt.status == 401 && resp.header.Get("WWW-Authenticate") == "" {
				t.Fatalf("%s: want WWW-Authenticate on a 401", tt.name)
			}
		}
		b.requireNothingStored(t)
	})

	// Which of two copies counts is for nobody to guess: a client, a proxy and the API might
	// each pick another.
	t.Run("RepeatedHeadersAndParamsAre400", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		auth := "Bearer " + b.Rider.Token
		tests := []struct {
			name   string
			header http.Header
			body   string
			code   problem.Code
			param  string
		}{
			{"IdempotencyKeyTwice", http.Header{"Authorization": {auth}, "Idempotency-Key": {testKey, "f2b4c1d0-8d0e-4a57-9b5b-3f6f4b1e2a90"}},
				testBody, problem.CodeDuplicateHeader, ""},
			{"AuthorizationTwice", http.Header{"Authorization": {auth, "Bearer rr_someone_else"}, "Idempotency-Key": {testKey}},
				testBody, problem.CodeDuplicateHeader, ""},
			{"AuthorizationTwiceTheSame", http.Header{"Authorization": {auth, auth}, "Idempotency-Key": {testKey}},
				testBody, problem.CodeDuplicateHeader, ""},
			{"JSONParamTwice", http.Header{"Authorization": {auth}, "Idempotency-Key": {testKey}, "Content-Type": {"application/json"}},
				`{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0, "origin_lat": 1}`, problem.CodeInvalidParameter, "origin_lat"},
		}
		for _, tt := range tests {
			resp := b.doHeader(t, http.MethodPost, "/rides", tt.header, tt.body)
			p := resp.requireProblem(t, http.StatusBadRequest, tt.code)
			if p.Param != tt.param || (tt.code == problem.CodeDuplicateHeader && !strings.Contains(p.Detail, "more than once")) {
				t.Fatalf("%s: want the repeat named, got %s", tt.name, resp.body)
			}
		}
		b.requireNothingStored(t)
	})

	// The IETF draft sends the key as a quoted string; quoted or bare, it is one key.
	t.Run("QuotedKeyIsTheSameKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		first := b.postRide(t, b.Rider, `"`+testKey+`"`, testBody)
		first.rideCreated(t)

		bare := b.postRide(t, b.Rider, testKey, testBody)
		bare.rideCreated(t)
		if bare.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(bare.body, first.body) {
			t.Fatalf("want the bare spelling to replay the quoted one's ride, got %q %s", bare.header.Get("Idempotent-Replayed"), bare.body)
		}
		if got := b.Count(t, `SELECT count(*) FROM idempotency_keys WHERE idempotency_key = $1`, testKey); got != 1 {
			t.Fatalf("want the key stored without its quotes, got %d rows", got)
		}
		if n := len(b.SucceededCharges()); n != 1 {
			t.Fatalf("want 1 charge, got %d", n)
		}

		b.postRide(t, b.Rider, `"`+testKey, testBody).requireProblem(t, http.StatusBadRequest, problem.CodeIdempotencyKeyInvalid)
	})

	t.Run("BodyOfExactly64KiBIsAccepted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		body := testBody + strings.Repeat(" ", 64<<10-len(testBody))
		b.postRide(t, b.Rider, testKey, body).rideCreated(t)
	})

	t.Run("ParamsMismatchIs422", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)

		resp := b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0}`)
		resp.requireProblem(t, http.StatusUnprocessableEntity, problem.CodeIdempotencyKeyReused)
		if n := b.Count(t, `SELECT count(*) FROM rides`); n != 1 {
			t.Fatalf("want 1 ride, got %d", n)
		}
	})

	t.Run("KeyInUseIs409WithRetryAfter", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{simulateErrors: true})
		b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0, "raise_error": true}`)
		b.Exec(t, `UPDATE idempotency_keys SET locked_at = now() - interval '30 seconds', locked_until = now() + interval '1 minute', lock_generation = lock_generation + 1`)

		resp := b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0}`)
		resp.requireProblem(t, http.StatusConflict, problem.CodeIdempotencyKeyInUse)
		if resp.header.Get("Retry-After") == "" {
			t.Fatal("want Retry-After on a 409")
		}
	})

	t.Run("SimulatedErrorIs500ThenRetrySucceeds", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{simulateErrors: true})
		resp := b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0, "raise_error": true}`)
		resp.requireProblem(t, http.StatusInternalServerError, problem.CodeInternalError)

		b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0}`).rideCreated(t)
		if n := len(b.SucceededCharges()); n != 1 {
			t.Fatalf("want 1 charge, got %d", n)
		}
	})

	t.Run("CardDeclinedIs402AndReplayed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		first := b.postRide(t, b.DecliningRider, testKey, testBody)
		p := first.requireProblem(t, http.StatusPaymentRequired, problem.CodeCardDeclined)
		// Stripe writes a decline's message and code for the card's holder: they are passed on.
		if p.Detail != "Your card was declined." || p.DeclineCode != "generic_decline" {
			t.Fatalf("want Stripe's message and decline_code, got %s", first.body)
		}

		replay := b.postRide(t, b.DecliningRider, testKey, testBody)
		replayed := replay.requireProblem(t, http.StatusPaymentRequired, problem.CodeCardDeclined)
		// The same document, but for the id of the request it answers (requireProblem checks
		// that it is the replay's own).
		if replayed.RequestID == p.RequestID {
			t.Fatalf("want the replay answered with its own request id, got the first's %q", p.RequestID)
		}
		replayed.RequestID = p.RequestID
		if replay.header.Get("Idempotent-Replayed") != "true" || replayed != p {
			t.Fatalf("want the 402 replayed, got %s after %s", replay.body, first.body)
		}
	})

	// Stripe's message for a refusal that is not a decline is about our request and names our
	// own ids: the rider and the stored answer get our text, the log gets Stripe's.
	t.Run("ChargeRefusedAsInvalidIs402WithoutStripesText", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Exec(t, `UPDATE users SET stripe_customer_id = 'cus_NotAtStripe42' WHERE id = $1`, b.Rider.ID)

		first := b.postRide(t, b.Rider, testKey, testBody)
		first.requireProblem(t, http.StatusPaymentRequired, problem.CodePaymentRejected)
		replay := b.postRide(t, b.Rider, testKey, testBody)
		replay.requireProblem(t, http.StatusPaymentRequired, problem.CodePaymentRejected)
		var stored string
		if err := b.Pool.QueryRow(t.Context(), `SELECT response_body::text FROM idempotency_keys`).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		for _, leak := range []string{"No such customer", "cus_NotAtStripe42", "resource_missing"} {
			for name, text := range map[string]string{"answer": string(first.body), "replay": string(replay.body), "stored response": stored} {
				if strings.Contains(text, leak) {
					t.Fatalf("want none of Stripe's error in the %s, found %q in %s", name, leak, text)
				}
			}
		}

		line := b.logs.requireLine(t, "Phases: charge sent to Stripe")
		if errText, _ := line["error"].(string); !strings.Contains(errText, "No such customer: 'cus_NotAtStripe42'") ||
			!strings.HasPrefix(fmt.Sprint(line["stripe_request_id"]), "req_") || line["outcome"] != string(problem.CodePaymentRejected) {
			t.Fatalf("want Stripe's full error logged with its request id, got %v", line)
		}
	})

	t.Run("StripeDownIs503ThenRetrySucceeds", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)

		resp := b.postRide(t, b.Rider, testKey, testBody)
		resp.requireProblem(t, http.StatusServiceUnavailable, problem.CodePaymentProcessorUnavailable)
		if resp.header.Get("Retry-After") == "" {
			t.Fatal("want Retry-After on a 503")
		}

		b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
		if n := len(b.SucceededCharges()); n != 1 {
			t.Fatalf("want 1 charge, got %d", n)
		}
	})

	t.Run("StripeChargedButAnswerLostRetryGetsOneCharge", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{freshStripeConnections: true})
		b.Stripe.InjectChargeFaults(fakestripe.FaultChargeThenDrop, 1)

		b.postRide(t, b.Rider, testKey, testBody).requireProblem(t, http.StatusServiceUnavailable, problem.CodePaymentProcessorUnavailable)
		if n := len(b.SucceededCharges()); n != 1 {
			t.Fatalf("want Stripe to hold the charge whose answer was lost, got %d", n)
		}

		body := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
		charges := b.SucceededCharges()
		if len(charges) != 1 || *body.Ride.StripeChargeID != charges[0].ID {
			t.Fatalf("want the one charge on the ride, got %+v", charges)
		}
	})

	t.Run("TwentyConcurrentRequestsWithOneKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})

		const n = 20
		responses := make([]*response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				responses[i] = b.postRide(t, b.Rider, testKey, testBody)
			})
		}
		close(start)
		wg.Wait()

		var fresh []*response
		var replays []*response
		for _, resp := range responses {
			switch resp.status {
			case http.StatusCreated:
				resp.rideCreated(t)
				if resp.header.Get("Idempotent-Replayed") == "true" {
					replays = append(replays, resp)
				} else {
					fresh = append(fresh, resp)
				}
			case http.StatusConflict:
				resp.requireProblem(t, http.StatusConflict, problem.CodeIdempotencyKeyInUse)
				if resp.header.Get("Retry-After") == "" {
					t.Fatal("want Retry-After on every 409")
				}
			default:
				t.Fatalf("want 201 or 409, got %d: %s", resp.status, resp.body)
			}
		}
		if len(fresh) != 1 {
			t.Fatalf("want exactly one request to have done the work, got %d", len(fresh))
		}
		for _, replay := range replays {
			if !bytes.Equal(replay.body, fresh[0].body) {
				t.Fatalf("want replays identical to the first answer, got %s vs %s", replay.body, fresh[0].body)
			}
		}
		for table, want := range map[string]int{"rides": 1, "audit_records": 1, "staged_jobs": 1, "idempotency_keys": 1} {
			if got := b.Count(t, `SELECT count(*) FROM `+table); got != want {
				t.Fatalf("want %d rows in %s, got %d", want, table, got)
			}
		}
		if got := len(b.SucceededCharges()); got != 1 {
			t.Fatalf("want 1 charge, got %d", got)
		}
	})

	t.Run("SameKeyFromTwoUsersMakesTwoRides", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		other := b.NewRider(t, "tok_visa")

		one := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
		two := b.postRide(t, other, testKey, testBody).rideCreated(t)
		if one.Ride.ID == two.Ride.ID || *one.Ride.StripeChargeID == *two.Ride.StripeChargeID {
			t.Fatal("want two rides with two charges")
		}
		if got := len(b.SucceededCharges()); got != 2 {
			t.Fatalf("want 2 charges, got %d", got)
		}
	})
}

func TestGetRide(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	created := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
	get := func(rider *ridetest.Rider, id string) *response {
		return b.do(t, http.MethodGet, "/rides/"+id, map[string]string{"Authorization": "Bearer " + rider.Token}, "")
	}

	t.Run("OwnRide", func(t *testing.T) {
		resp := get(b.Rider, fmt.Sprint(created.Ride.ID))
		if resp.status != http.StatusOK || !bytes.Contains(resp.body, []byte(*created.Ride.StripeChargeID)) {
			t.Fatalf("want the ride, got %d %s", resp.status, resp.body)
		}
	})
	t.Run("SomeoneElsesRideIs404", func(t *testing.T) {
		get(b.DecliningRider, fmt.Sprint(created.Ride.ID)).requireProblem(t, http.StatusNotFound, problem.CodeNotFound)
	})
	t.Run("MissingRideIs404", func(t *testing.T) {
		get(b.Rider, "999999").requireProblem(t, http.StatusNotFound, problem.CodeNotFound)
		get(b.Rider, "not-a-number").requireProblem(t, http.StatusNotFound, problem.CodeNotFound)
	})
	t.Run("Unauthenticated", func(t *testing.T) {
		b.do(t, http.MethodGet, "/rides/1", nil, "").requireProblem(t, http.StatusUnauthorized, problem.CodeUnauthorized)
	})
}

// TestDeclinedRide: a booking whose card was declined leaves a ride that every read shows as
// declined, never booked, and that a cancel finds nothing to refund of.
func TestDeclinedRide(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.postRide(t, b.DecliningRider, testKey, testBody).requireProblem(t, http.StatusPaymentRequired, problem.CodeCardDeclined)
	auth := map[string]string{"Authorization": "Bearer " + b.DecliningRider.Token}

	var list struct {
		Data []map[string]any `json:"data"`
	}
	resp := b.do(t, http.MethodGet, "/rides", auth, "")
	if resp.status != http.StatusOK || json.Unmarshal(resp.body, &list) != nil || len(list.Data) != 1 {
		t.Fatalf("want the declined ride listed, got %d %s", resp.status, resp.body)
	}
	ride := list.Data[0]
	if ride["status"] != "declined" || ride["stripe_charge_id"] != nil {
		t.Fatalf("want the ride declined and uncharged in GET /rides, got %s", resp.body)
	}

	var one struct {
		Ride map[string]any `json:"ride"`
	}
	resp = b.do(t, http.MethodGet, "/rides/"+ride["id"].(string), auth, "")
	if resp.status != http.StatusOK || json.Unmarshal(resp.body, &one) != nil || one.Ride["status"] != "declined" {
		t.Fatalf("want the ride declined in GET /rides/{id}, got %d %s", resp.status, resp.body)
	}

	id, _ := strconv.ParseInt(ride["id"].(string), 10, 64)
	b.cancelRide(t, b.DecliningRider, "cancel-declined-ride-0123456789", id).
		requireProblem(t, http.StatusConflict, problem.CodeRideNotCharged)
	if got := b.rideStatus(t, id); got != "declined" {
		t.Fatalf("want the ride still declined after the cancel, got %s", got)
	}
}

// TestListRides pages through a rider's rides, newest first, by Stripe's list conventions, and
// shows each ride's receipt time once the worker recorded it.
func TestListRides(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var booked []int64 // oldest first
	for i := range 5 {
		created := b.postRide(t, b.Rider, fmt.Sprintf("list-rides-key-%02d-0123456789", i), testBody).rideCreated(t)
		booked = append(booked, created.Ride.ID)
	}
	other := b.postRide(t, b.DecliningRider, testKey, testBody) // a declined ride of someone else's
	other.requireProblem(t, http.StatusPaymentRequired, problem.CodeCardDeclined)
	b.Exec(t, `UPDATE rides SET receipt_sent_at = now(), receipt_message_id = 'receipt@test' WHERE id = $1`, booked[4])
	list := func(query string) *response {
		return b.do(t, http.MethodGet, "/rides"+query, map[string]string{"Authorization": "Bearer " + b.Rider.Token}, "")
	}

	t.Run("PagesNewestFirst", func(t *testing.T) {
		var got []int64
		query := "?limit=2"
		for page := 0; ; page++ {
			resp := list(query)
			var body resource.RideList
			if resp.status != http.StatusOK || json.Unmarshal(resp.body, &body) != nil || body.Object != "list" || body.URL != "/rides" {
				t.Fatalf("want a list, got %d %s", resp.status, resp.body)
			}
			for _, ride := range body.Data {
				got = append(got, ride.ID)
			}
			if wantMore := page < 2; body.HasMore != wantMore || len(body.Data) != min(2, 5-2*page) {
				t.Fatalf("page %d: want %d rides and has_more %t, got %s", page, min(2, 5-2*page), wantMore, resp.body)
			}
			if !body.HasMore {
				break
			}
			query = fmt.Sprintf("?limit=2&starting_after=%d", body.Data[len(body.Data)-1].ID)
		}
		want := slices.Clone(booked)
		slices.Reverse(want)
		if !slices.Equal(got, want) {
			t.Fatalf("want the rider's five rides newest first, %v, got %v", want, got)
		}
	})
	t.Run("DefaultLimitAndReceiptTime", func(t *testing.T) {
		var body resource.RideList
		resp := list("")
		if resp.status != http.StatusOK || json.Unmarshal(resp.body, &body) != nil || len(body.Data) != 5 || body.HasMore {
			t.Fatalf("want all five rides on one page, got %d %s", resp.status, resp.body)
		}
		if body.Data[0].ReceiptSentAt == nil || body.Data[1].ReceiptSentAt != nil {
			t.Fatalf("want the newest ride's receipt time and no other, got %s", resp.body)
		}
		one := b.do(t, http.MethodGet, fmt.Sprintf("/rides/%d", booked[4]), map[string]string{"Authorization": "Bearer " + b.Rider.Token}, "")
		if !bytes.Contains(one.body, []byte(`"receipt_sent_at":"`)) {
			t.Fatalf("want GET /rides/{id} to show the receipt time, got %s", one.body)
		}
	})
	t.Run("BadParameters", func(t *testing.T) {
		var otherRide int64
		if err := b.Pool.QueryRow(t.Context(), `SELECT id FROM rides WHERE user_id = $1`, b.DecliningRider.ID).Scan(&otherRide); err != nil {
			t.Fatal(err)
		}
		for _, query := range []string{"?limit=0", "?limit=101", "?limit=x", "?limit=1&limit=2", "?starting_after=abc",
			fmt.Sprintf("?starting_after=%d", otherRide), "?ending_before=1"} {
			list(query).requireProblem(t, http.StatusBadRequest, problem.CodeInvalidParameter)
		}
	})
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, path := range []string{"/healthz", "/readyz"} {
		if resp := b.do(t, http.MethodGet, path, nil, ""); resp.status != http.StatusOK {
			t.Fatalf("%s: want 200, got %d %s", path, resp.status, resp.body)
		}
	}
	b.do(t, http.MethodGet, "/nowhere", nil, "").requireProblem(t, http.StatusNotFound, problem.CodeNotFound)

	b.Pool.Close()
	b.do(t, http.MethodGet, "/readyz", nil, "").requireProblem(t, http.StatusServiceUnavailable, problem.CodeServiceUnavailable)
}

// TestHealthChecksAreQuiet counts what a load balancer's probes cost in log at info level.
func TestHealthChecksAreQuiet(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const maxLogBytes = 10 << 10

	for _, path := range []string{"/healthz", "/readyz"} {
		before := b.logs.Len()
		for range 1000 {
			if resp := b.do(t, http.MethodGet, path, nil, ""); resp.status != http.StatusOK {
				t.Fatalf("%s: want 200, got %d %s", path, resp.status, resp.body)
			}
		}
		if added := b.logs.Len() - before; added >= maxLogBytes {
			t.Fatalf("1,000 checks of %s added %d bytes of log, want under %d", path, added, maxLogBytes)
		}
	}

	// The log does work: any other request is a line.
	before := b.logs.Len()
	b.do(t, http.MethodGet, "/rides/1", map[string]string{"Authorization": "Bearer " + b.Rider.Token}, "")
	if b.logs.Len() == before {
		t.Fatal("want a request that is not a health check logged")
	}
}
