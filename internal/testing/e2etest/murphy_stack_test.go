package e2etest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
)

// Timeouts of the processes the Murphy scenarios run. The lock lease is the default one, since
// the scenarios show what a rider sees with it: a dead request's key is free again within it.
// The Stripe timeout is short so that the scenarios of a Stripe that times out take seconds; it
// is still hundreds of times what a charge at the local Stripe stand-in takes.
const (
	murphyStripeTimeout = 900 * time.Millisecond

	// murphyTakeoverWithin is how soon after an API died a retry through another replica must
	// have booked the ride, with the default lease (5 s): it takes 6 s or so on an idle machine.
	// The bound is half the article's 90 s lock timeout, which would hold the key past it,
	// and far enough past the lease that a loaded machine does not fail a correct system.
	murphyTakeoverWithin = 45 * time.Second

	// murphyWait bounds every wait on a condition. The conditions normally hold within seconds;
	// the bound is generous for a loaded two-core CI machine, where a deadline that is too tight
	// would fail a correct system.
	murphyWait = 60 * time.Second
)

// murphyParams is the ride every scenario books, unless it books several.
var murphyParams = client.RideParams{OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.8715, TargetLon: -122.2730}

// murphyStack is one scenario's own world: a database, a Stripe stand-in process, optionally an
// SMTP server, and a rider. The processes under test (APIs, completer, enqueuer, worker) are
// started by the scenario, each as a separate process, so that it can kill them.
type murphyStack struct {
	t           *testing.T
	databaseURL string
	pool        *pgxpool.Pool
	stripe      *proctest.Process
	stripeURL   string
	mail        *smtptest.Server
	token       string
	email       string
}

// murphyOptions changes what newMurphyStack sets up.
type murphyOptions struct {
	// DatabaseURL is a migrated database to use; empty means a fresh one from dbtest.
	DatabaseURL string

	// Mail starts an SMTP server that the worker mails receipts to.
	Mail bool
}

// newMurphyStack starts a scenario's world and creates its rider, whose card works.
func newMurphyStack(t *testing.T, opts murphyOptions) *murphyStack {
	t.Helper()
	s := &murphyStack{t: t, databaseURL: opts.DatabaseURL, email: "murphy@example.com"}
	if s.databaseURL == "" {
		s.databaseURL = dbtest.NewDB(t)
	}
	if opts.Mail {
		s.mail = smtptest.NewServer(t, smtptest.Options{})
	}
	s.stripe = proctest.Start(t, proctest.Build(t, "fakestripe"), nil, "-addr", "127.0.0.1:0")
	s.stripeURL = strings.TrimSpace(proctest.WaitOutput(t, s.stripe, "http://", 10*time.Second))

	pool, err := pgxpool.New(context.Background(), s.databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s.pool = pool

	s.token = createRider(t, proctest.Build(t, "admin"), s.env(), s.email)
	return s
}

// env is the environment every process of the stack gets, with extra appended (a later value
// of a variable wins).
func (s *murphyStack) env(extra ...string) []string {
	env := []string{
		"DATABASE_URL=" + s.databaseURL,
		"STRIPE_API_KEY=sk_test_murphy",
		"API_TOKEN_SECRET=" + ridetest.TokenSecret,
		"STRIPE_API_URL=" + s.stripeURL,
		"STRIPE_TIMEOUT=" + murphyStripeTimeout.String(),
		// Several clients retry hard as one rider, which the API's limits would slow down;
		// these tests are about failures, and api's own tests cover the limits.
		"RATE_LIMITS=off",
	}
	if s.mail != nil {
		env = append(env, "SMTP_URL="+s.mail.URL())
	}
	return append(env, extra...)
}

// murphyAPI is a running API process.
type murphyAPI struct {
	*proctest.Process
	Port int
	URL  string
}

// startAPI starts an API process on port (0: a free one) with extra environment, and waits until
// it is ready.
func (s *murphyStack) startAPI(port int, extra ...string) *murphyAPI {
	s.t.Helper()
	if port == 0 {
		port = proctest.FreePort(s.t)
	}
	api := &murphyAPI{Port: port, URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	api.Process = proctest.Start(s.t, proctest.Build(s.t, "api"), s.env(append([]string{fmt.Sprintf("PORT=%d", port)}, extra...)...))
	proctest.WaitHTTP(s.t, api.Process, api.URL+"/readyz", 15*time.Second)
	return api
}

// start starts another process of the service (enqueuer, worker, ...) with extra environment.
func (s *murphyStack) start(name string, extra ...string) *proctest.Process {
	s.t.Helper()
	return proctest.Start(s.t, proctest.Build(s.t, name), s.env(extra...))
}

// runCompleter makes one completer pass over keys of any age, as if their clients had been
// gone for long, and returns what it did.
func (s *murphyStack) runCompleter() (succeeded, failed int) {
	s.t.Helper()
	out, errOut, code := proctest.Run(s.t, proctest.Build(s.t, "completer"),
		s.env("COMPLETER_MIN_AGE=1ms", "COMPLETER_IDLE_FOR=1ms"), "-once")
	if code != 0 {
		s.t.Fatalf("completer -once exited %d:\n%s", code, errOut)
	}
	var res struct{ Succeeded, Failed int }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		s.t.Fatalf("completer -once printed %q: %s\n%s", out, err, errOut)
	}
	if res.Failed > 0 {
		s.t.Logf("completer -once output:\n%s", errOut)
	}
	return res.Succeeded, res.Failed
}

// client is the retrying client of a mobile app, as the rider, with a quick backoff: the
// scenarios are about what the server does, and a realistic backoff would only make them slow.
// The server's Retry-After is still honoured.
func (s *murphyStack) client(baseURL string) *client.Client {
	return &client.Client{
		BaseURL:     baseURL,
		Token:       s.token,
		MaxElapsed:  murphyWait,
		BaseBackoff: 20 * time.Millisecond,
		MaxBackoff:  200 * time.Millisecond,
	}
}

// newKey returns a fresh Idempotency-Key.
func newKey(t *testing.T) string {
	t.Helper()
	key, err := client.NewIdempotencyKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// rawAnswer is what one plain HTTP request got: an answer, or a network error.
type rawAnswer struct {
	Status int
	Header http.Header
	Body   []byte
	Err    error
}

// Code is the problem code of an error answer.
func (a rawAnswer) Code() string {
	var p struct{ Code string }
	_ = json.Unmarshal(a.Body, &p) // a body that is no problem document has no code
	return p.Code
}

// RideID is the ride id of a 201 answer.
func (a rawAnswer) RideID() int64 {
	var created struct {
		Ride struct {
			ID int64 `json:"id,string"`
		}
	}
	_ = json.Unmarshal(a.Body, &created) // a body without a ride has id 0
	return created.Ride.ID
}

func (a rawAnswer) String() string {
	if a.Err != nil {
		return "network error: " + a.Err.Error()
	}
	return fmt.Sprintf("%d %s (replayed %q, Retry-After %q)", a.Status, a.Body,
		a.Header.Get("Idempotent-Replayed"), a.Header.Get("Retry-After"))
}

// post sends one POST /rides with key, without any retry: what one attempt of a client sees.
func (s *murphyStack) post(baseURL, key string, params client.RideParams) rawAnswer {
	body, err := json.Marshal(params)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.send(baseURL+"/rides", key, body)
}

// send sends one POST to url with key and body (none if nil), without any retry. It uses a
// connection of its own, so that a process killed under it cannot leave a stale one behind for
// the next request.
func (s *murphyStack) send(url, key string, body []byte) rawAnswer {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Idempotency-Key", key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	httpClient := &http.Client{Timeout: murphyWait, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := httpClient.Do(req)
	if err != nil {
		return rawAnswer{Err: err}
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	if err != nil {
		return rawAnswer{Err: err}
	}
	return rawAnswer{Status: resp.StatusCode, Header: resp.Header, Body: respBody}
}

// answerRecorder is an http.RoundTripper that notes each answer the client got (its status, or
// 0 for a network error) and when it came, so that a scenario can say what the client went
// through on its way to the result.
type answerRecorder struct {
	mu       sync.Mutex
	statuses []int
	times    []time.Time
}

func (r *answerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	at := time.Now()
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	r.mu.Lock()
	r.statuses = append(r.statuses, status)
	r.times = append(r.times, at)
	r.mu.Unlock()
	return resp, err
}

// First returns the first answer's status and when it came; it fails the test if there was none.
func (r *answerRecorder) First(t *testing.T) (status int, at time.Time) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.statuses) == 0 {
		t.Fatal("the client got no answer at all")
	}
	return r.statuses[0], r.times[0]
}

// Statuses returns the statuses noted so far, 0 for a network error.
func (r *answerRecorder) Statuses() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.statuses...)
}

// recordAnswers makes c send through a new answerRecorder, and returns it.
func recordAnswers(c *client.Client) *answerRecorder {
	rec := &answerRecorder{}
	c.HTTPClient = &http.Client{Transport: rec, Timeout: murphyWait}
	return rec
}

// stripeCharge is a charge as the Stripe stand-in's control API reports it.
type stripeCharge struct {
	ID             string            `json:"id"`
	Amount         int64             `json:"amount"`
	Status         string            `json:"status"`
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
}

// stripeCharges is what Stripe holds: how many charge requests it got, and the charges.
type stripeCharges struct {
	ChargeRequests int            `json:"charge_requests"`
	Charges        []stripeCharge `json:"charges"`
}

// Succeeded returns the charges that took money, for the Stripe idempotency key stripeKey, or
// all of them when stripeKey is empty.
func (c stripeCharges) Succeeded(stripeKey string) []stripeCharge {
	var out []stripeCharge
	for _, ch := range c.Charges {
		if ch.Status == "succeeded" && (stripeKey == "" || ch.IdempotencyKey == stripeKey) {
			out = append(out, ch)
		}
	}
	return out
}

// stripeCharges asks the Stripe stand-in what it holds.
func (s *murphyStack) stripeCharges() stripeCharges {
	s.t.Helper()
	var charges stripeCharges
	s.stripeControl(http.MethodGet, "charges", nil, &charges)
	return charges
}

// stripeFaults queues count faults of kind ("error_500", "timeout", ...) at Stripe; each
// charge request takes the next one.
func (s *murphyStack) stripeFaults(kind string, count int) {
	s.t.Helper()
	s.stripeControl(http.MethodPost, "faults", map[string]any{"kind": kind, "count": count}, nil)
}

// stripeLatency delays every Stripe API request by d.
func (s *murphyStack) stripeLatency(d time.Duration) {
	s.t.Helper()
	s.stripeControl(http.MethodPost, "latency", map[string]any{"ms": d.Milliseconds()}, nil)
}

func (s *murphyStack) stripeControl(method, path string, in, out any) {
	s.t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			s.t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.stripeURL+"/_fakestripe/"+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		s.t.Fatalf("Stripe control %s %s: %s", method, path, err)
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("Stripe control %s %s: %d %s %v", method, path, resp.StatusCode, respBody, err)
	}
	if out != nil {
		if err := json.Unmarshal(respBody, out); err != nil {
			s.t.Fatalf("Stripe control %s %s answered %q: %s", method, path, respBody, err)
		}
	}
}

// keyRow is an idempotency key as stored.
type keyRow struct {
	ID                       int64
	RecoveryPoint            string
	Locked                   bool
	LeaseLeft                time.Duration // how long until the key's lease runs out, by the database's clock
	LockedUntil              time.Time     // when the key's lease runs out; zero if unlocked
	LockExpired              bool          // locked, and longer ago than the lock timeout
	ForeignMutationAttempted bool
	ResponseCode             *int
	ResponseBody             []byte
	StripeKey                string
	LastError                *string
	RideID                   *int64
	RideStripeCharge         *string
	RideReceiptSentAt        *time.Time
}

// key reads the rider's key and its ride, if any.
func (s *murphyStack) key(key string) keyRow {
	s.t.Helper()
	var (
		k                keyRow
		leaseLeftSeconds float64
		lockedUntil      *time.Time
	)
	err := s.pool.QueryRow(context.Background(), `
		SELECT k.id, k.recovery_point, k.locked_until IS NOT NULL,
			coalesce(extract(epoch FROM k.locked_until - now())::float8, 0), k.locked_until,
			k.charge_attempted_at IS NOT NULL, k.response_code, k.response_body, k.stripe_idempotency_key,
			k.last_error, r.id, r.stripe_charge_id, r.receipt_sent_at
		FROM idempotency_keys k LEFT JOIN rides r ON r.user_id = k.user_id AND r.idempotency_key_id = k.id
		WHERE k.idempotency_key = $1`, key).
		Scan(&k.ID, &k.RecoveryPoint, &k.Locked, &leaseLeftSeconds, &lockedUntil, &k.ForeignMutationAttempted, &k.ResponseCode,
			&k.ResponseBody, &k.StripeKey, &k.LastError, &k.RideID, &k.RideStripeCharge, &k.RideReceiptSentAt)
	if errors.Is(err, pgx.ErrNoRows) {
		s.t.Fatalf("no idempotency key %s in the database", key)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	k.LeaseLeft = time.Duration(leaseLeftSeconds * float64(time.Second))
	if lockedUntil != nil {
		k.LockedUntil = *lockedUntil
	}
	k.LockExpired = k.Locked && k.LeaseLeft <= 0
	return k
}

// keyExists reports whether the rider's key is stored.
func (s *murphyStack) keyExists(key string) bool {
	s.t.Helper()
	var exists bool
	if err := s.pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM idempotency_keys WHERE idempotency_key = $1)`, key).Scan(&exists); err != nil {
		s.t.Fatal(err)
	}
	return exists
}

// count runs a SELECT count(*) ... and returns the count.
func (s *murphyStack) count(query string, args ...any) int {
	s.t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		s.t.Fatalf("%s: %s", query, err)
	}
	return n
}

// waitFor polls cond until it holds, failing the test after murphyWait.
func (s *murphyStack) waitFor(what string, cond func() bool) {
	s.t.Helper()
	waitFor(s.t, what, cond)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(murphyWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", murphyWait, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// waitLockExpired waits until the lease on the key, left by a request that died or is frozen,
// ran out by the database's clock, which is the clock the takeover is decided on.
func (s *murphyStack) waitLockExpired(key string) {
	s.t.Helper()
	s.waitFor("the lock of key "+key+" to expire", func() bool {
		k := s.key(key)
		return !k.Locked || k.LockExpired
	})
}

// assertBookedOnce checks the outcome every finished key must have: the key finished with a
// stored 201 naming its ride, and unlocked; exactly one ride for it, charged; and exactly one
// succeeded charge at Stripe for the key's Stripe idempotency key, the very charge the ride
// records, for $20.00. With got, what a client got, it checks that the client got that ride.
// It returns the key as stored.
func (s *murphyStack) assertBookedOnce(key string, got *client.Result) keyRow {
	s.t.Helper()
	k := s.key(key)
	if k.RecoveryPoint != "finished" || k.ResponseCode == nil || *k.ResponseCode != http.StatusCreated || k.Locked {
		s.t.Fatalf("key %s: want finished with a stored 201 and unlocked, got %s, response %v, locked %t, last error %v",
			key, k.RecoveryPoint, deref(k.ResponseCode), k.Locked, deref(k.LastError))
	}
	if rides := s.count(`SELECT count(*) FROM rides WHERE idempotency_key_id = $1`, k.ID); rides != 1 {
		s.t.Fatalf("key %s: want exactly one ride, got %d", key, rides)
	}
	if k.RideStripeCharge == nil {
		s.t.Fatalf("key %s: ride %d records no charge", key, *k.RideID)
	}
	if stored := (rawAnswer{Body: k.ResponseBody}).RideID(); stored != *k.RideID {
		s.t.Fatalf("key %s: the stored response names ride %d, want %d: %s", key, stored, *k.RideID, k.ResponseBody)
	}
	if got != nil && got.Ride.ID != strconv.FormatInt(*k.RideID, 10) {
		s.t.Fatalf("key %s: the client got ride %s, the key records ride %d", key, got.Ride.ID, *k.RideID)
	}
	charges := s.stripeCharges().Succeeded(k.StripeKey)
	if len(charges) != 1 {
		s.t.Fatalf("key %s: want exactly one succeeded charge at Stripe for %s, got %+v", key, k.StripeKey, charges)
	}
	if charges[0].ID != *k.RideStripeCharge || charges[0].Amount != 20_00 ||
		charges[0].Metadata["idempotency_key"] != key {
		s.t.Fatalf("key %s: Stripe's charge %+v is not ride %d's charge %s for $20.00", key, charges[0], *k.RideID, *k.RideStripeCharge)
	}
	return k
}

// assertChargeRequests checks how many charge requests Stripe got, failed and replayed ones
// included: how often the service asked, which says which path a scenario took.
func (s *murphyStack) assertChargeRequests(want int) {
	s.t.Helper()
	if got := s.stripeCharges().ChargeRequests; got != want {
		s.t.Fatalf("want %d charge requests at Stripe, got %d", want, got)
	}
}

// assertTotals checks what the scenario left as a whole: every key finished and unlocked,
// nothing set aside for a person in abandoned_requests, wantRides rides, each charged, and at
// Stripe exactly one succeeded charge per ride and none that no ride records.
func (s *murphyStack) assertTotals(wantRides int) {
	s.t.Helper()
	if open := s.count(`SELECT count(*) FROM idempotency_keys WHERE recovery_point <> 'finished' OR locked_at IS NOT NULL`); open != 0 {
		s.t.Fatalf("want every key finished and unlocked, %d are not", open)
	}
	if abandoned := s.count(`SELECT count(*) FROM abandoned_requests`); abandoned != 0 {
		s.t.Fatalf("want no request left for a person to review, got %d", abandoned)
	}
	rides := s.count(`SELECT count(*) FROM rides`)
	charged := s.count(`SELECT count(DISTINCT stripe_charge_id) FROM rides`)
	if rides != wantRides || charged != wantRides {
		s.t.Fatalf("want %d rides, each with its own charge; got %d rides, %d distinct charges", wantRides, rides, charged)
	}
	for _, ch := range s.stripeCharges().Succeeded("") {
		if s.count(`SELECT count(*) FROM rides WHERE stripe_charge_id = $1`, ch.ID) != 1 {
			s.t.Fatalf("Stripe holds charge %s (key %s) that no ride records", ch.ID, ch.IdempotencyKey)
		}
	}
	if got := len(s.stripeCharges().Succeeded("")); got != wantRides {
		s.t.Fatalf("want %d succeeded charges at Stripe, got %d", wantRides, got)
	}
}

// assertReceiptStaged checks that exactly one receipt job for the key's ride waits in
// staged_jobs, which the finishing phase committed together with the response.
func (s *murphyStack) assertReceiptStaged(k keyRow) {
	s.t.Helper()
	staged := s.count(`SELECT count(*) FROM staged_jobs WHERE job_name = 'send_ride_receipt' AND (job_args->>'ride_id')::bigint = $1`, *k.RideID)
	if staged != 1 {
		s.t.Fatalf("ride %d: want exactly one staged receipt job, got %d", *k.RideID, staged)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
