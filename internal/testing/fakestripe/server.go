// Package fakestripe is a stateful stand-in for the part of the Stripe API that Rocket Rides
// uses: customers and charges, held in memory and, in a Server made by Open, kept in a file too.
// It speaks Stripe's wire format (form-encoded requests, Bearer secret keys, JSON objects and
// Stripe's error envelope) so that the real stripe-go client runs against it unchanged, and it
// keeps Stripe's idempotency-key promises, which are the point of the whole project.
//
// Tests can make it misbehave the ways a network and a payment provider do (a 500, a request
// that hangs, a charge whose response never arrives) and then ask how many charges it holds,
// either through Go methods or, from another process, through a control API under
// /_fakestripe/ (see control.go). They can also act on a charge as the dashboard or a rider's
// bank would (refund it, dispute it), and receive what Stripe tells an account's webhook
// endpoint of it all: signed events, retried until answered 2xx, which tests can have
// duplicated, reordered or delayed (see webhook.go).
package fakestripe

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v76"
)

// stripeVersion is the API version stripe-go v76 pins (2023-10-16); Stripe echoes the version a
// request ran under, renders events in it, and the objects here are shaped after it.
const stripeVersion = stripe.APIVersion

// defaultTimeoutFaultHang bounds a FaultTimeout whose client never gives up: longer than any
// sane client timeout, short enough that a forgotten request cannot hold a test run for long.
const defaultTimeoutFaultHang = 2 * time.Minute

// Options configures a Server. The zero value is ready to use.
type Options struct {
	// APIKeys are the secret keys the Server accepts. Empty (the default) accepts any key that
	// starts with "sk_test_", as any test-mode account's key would.
	APIKeys []string

	// Logger receives one line per request. Nil (the default) discards them.
	Logger *slog.Logger

	// TimeoutFaultHang is how long a FaultTimeout holds a request whose client never gives up.
	// Zero means the default of 2 minutes.
	TimeoutFaultHang time.Duration

	// WebhookURL is the account's webhook endpoint: every event is POSTed there, signed with
	// WebhookSecret. Empty (the default) delivers nothing; events are still recorded.
	WebhookURL string

	// WebhookSecret is the endpoint's signing secret ("whsec_..."), with which each delivery's
	// Stripe-Signature header is computed.
	WebhookSecret string

	// WebhookRetryBase is the wait before retrying a delivery that failed, doubled after each
	// further failure up to WebhookRetryMax. Zero means the default of 100ms.
	WebhookRetryBase time.Duration

	// WebhookRetryMax caps the wait between retries of a delivery. Zero means the default of 5s.
	WebhookRetryMax time.Duration
}

// Server is the Stripe stand-in, an http.Handler safe for concurrent use. Its state lives in
// memory for the Server's lifetime, and in the journal of one made by Open; Reset empties it. It models one account: every accepted API
// key sees the same customers and charges, and only idempotency keys are scoped per API key.
type Server struct {
	apiKeys          []string
	logger           *slog.Logger
	timeoutFaultHang time.Duration
	mux              *http.ServeMux
	idempotency      *idempotencyStore
	journal          *journal // nil: the state lives in memory only
	webhooks         *webhooks

	closed    chan struct{} // closed by Close, to release requests held by faults
	closeOnce sync.Once

	mu            sync.Mutex
	customers     map[string]*customer
	charges       []*Charge // in creation order
	chargesByID   map[string]*Charge
	refunds       []*Refund // oldest first
	refundsByID   map[string]*Refund
	disputes      []*Dispute // oldest first
	disputesByID  map[string]*Dispute
	pendingFaults []FaultKind // consumed from the front, one per charge request

	pendingRefundFaults []FaultKind // likewise, one per refund request
	latency             time.Duration
	chargeRequests      int
	beforeChargeRun     func() // test hook, see export_test.go
}

// New returns a Server with no customers and no charges.
func New(opts Options) *Server {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	hang := opts.TimeoutFaultHang
	if hang <= 0 {
		hang = defaultTimeoutFaultHang
	}

	s := &Server{
		apiKeys:          slices.Clone(opts.APIKeys),
		logger:           logger,
		timeoutFaultHang: hang,
		mux:              http.NewServeMux(),
		idempotency:      newIdempotencyStore(),
		closed:           make(chan struct{}),
		customers:        make(map[string]*customer),
		chargesByID:      make(map[string]*Charge),
		refundsByID:      make(map[string]*Refund),
		disputesByID:     make(map[string]*Dispute),
		webhooks:         newWebhooks(opts, logger),
	}

	s.mux.Handle("POST /v1/customers", s.api(s.createCustomer))
	s.mux.Handle("GET /v1/customers/{id}", s.api(s.retrieveCustomer))
	s.mux.Handle("POST /v1/charges", s.withChargeFaults(s.api(s.createCharge)))
	s.mux.Handle("GET /v1/charges", s.api(s.listCharges))
	s.mux.Handle("GET /v1/charges/{id}", s.api(s.retrieveCharge))
	s.mux.Handle("POST /v1/refunds", s.withRefundFaults(s.api(s.createRefund)))
	s.mux.Handle("GET /v1/refunds/{id}", s.api(s.retrieveRefund))
	s.mux.Handle("GET /v1/disputes/{id}", s.api(s.retrieveDispute))
	s.mux.Handle("/v1/", s.api(unrecognizedURL))
	s.routeControl()

	return s
}

// ServeHTTP answers Stripe API requests under /v1/ and control requests under /_fakestripe/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		if !s.wait(r.Context(), s.currentLatency()) {
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// Close releases every request a fault is holding, so that an http.Server in front of this one
// can shut down, and stops webhook deliveries: the one in flight is abandoned and Close returns
// once its goroutine has. Requests that hit a timeout fault afterwards are dropped at once, and
// events emitted afterwards are recorded but not delivered. Calling it again does nothing more.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
	s.webhooks.close()
}

// Reset forgets all customers, charges, refunds, disputes, idempotent results, pending faults,
// latency and the charge request count, and all webhook events, deliveries (pending ones are
// dropped) and webhook behaviour, so that one long-running process can serve test after test.
// A journal (see Open) is emptied too.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.journal != nil {
		if err := s.journal.truncate(); err != nil {
			s.logger.Error("Fakestripe: error resetting journal", slog.String("error", err.Error()))
		}
	}

	s.customers = make(map[string]*customer)
	s.charges = nil
	s.chargesByID = make(map[string]*Charge)
	s.refunds = nil
	s.refundsByID = make(map[string]*Refund)
	s.disputes = nil
	s.disputesByID = make(map[string]*Dispute)
	s.pendingFaults = nil
	s.pendingRefundFaults = nil
	s.latency = 0
	s.chargeRequests = 0
	s.idempotency.reset()
	s.webhooks.reset()
}

// apiRequest is one Stripe API request: who sent it, under which idempotency key, with which
// parameters. apiKey and params are set once it is authenticated and decoded.
type apiRequest struct {
	r              *http.Request
	id             string // Request-Id, "req_..."
	apiKey         string
	idempotencyKey string
	params         url.Values

	// changes is what the request added to the Server's state, for its journal (see Open).
	changes journalEntry
}

func newAPIRequest(r *http.Request) *apiRequest {
	return &apiRequest{r: r, id: newID("req_"), idempotencyKey: strings.TrimSpace(r.Header.Get("Idempotency-Key"))}
}

// endpoint names what an idempotency key is bound to, e.g. "POST /v1/charges".
func (req *apiRequest) endpoint() string { return req.r.Method + " " + req.r.URL.Path }

// result is a handler's answer before it is written, so that the idempotency layer can save it
// and replay it byte for byte.
type result struct {
	status int
	body   []byte

	// saved is true when Stripe would keep this result under the idempotency key: the endpoint
	// began executing. Stripe saves successes and card declines, but not requests that failed
	// validation or authentication, so those can be retried with the same key.
	saved bool

	replayed          bool
	originalRequestID string
}

type handlerFunc func(req *apiRequest) result

// succeeded is a 200 whose body is v, saved under the idempotency key.
func succeeded(v any) result {
	return result{status: http.StatusOK, body: mustMarshal(v), saved: true}
}

// rejected is an error answered before the endpoint began executing, so not saved.
func rejected(e *apiError) result {
	return result{status: e.status, body: mustMarshal(map[string]any{"error": e})}
}

// failedExecuting is an error the endpoint reached while executing, such as a card decline;
// Stripe saves it, so a retry with the same key gets the same decline.
func failedExecuting(e *apiError) result {
	res := rejected(e)
	res.saved = true
	return res
}

// api wraps a handler with what every Stripe endpoint does: authenticate, decode parameters,
// honour Idempotency-Key on POST, write the JSON answer with Stripe's headers, and log it.
func (s *Server) api(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := newAPIRequest(r)

		var res result
		switch key := apiKey(r); {
		case !s.acceptsKey(key):
			res = rejected(authenticationFailed(key))
		case r.ParseForm() != nil:
			res = rejected(invalidRequest("", "", "Invalid request: the body could not be decoded as form parameters."))
		default:
			req.apiKey = key
			req.params = r.Form
			if r.Method == http.MethodPost && req.idempotencyKey != "" {
				res = s.idempotency.do(req, h)
			} else {
				res = h(req)
			}
		}

		if err := s.record(req); err != nil {
			// Told of nothing, the client retries; its key replays what memory holds.
			s.logger.ErrorContext(r.Context(), "Fakestripe: error recording request", slog.String("error", err.Error()))
			res = rejected(internalError())
		}
		writeResult(w, req, res)
		s.logger.InfoContext(r.Context(), "Fakestripe: answered request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", res.status),
			slog.String("request_id", req.id),
			slog.String("idempotency_key", req.idempotencyKey),
			slog.Bool("replayed", res.replayed))
	})
}

func writeResult(w http.ResponseWriter, req *apiRequest, res result) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Request-Id", req.id)
	h.Set("Stripe-Version", stripeVersion)
	if req.idempotencyKey != "" && req.r.Method == http.MethodPost {
		h.Set("Idempotency-Key", req.idempotencyKey)
	}
	if res.replayed {
		h.Set("Idempotent-Replayed", "true")
		h.Set("Original-Request", res.originalRequestID)
	}
	if res.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Basic realm="Stripe"`)
	}
	w.WriteHeader(res.status)
	_, _ = w.Write(res.body) // the client hung up; nothing left to tell it
}

// apiKey reads the secret key the way Stripe accepts it: Bearer auth (what stripe-go sends) or
// Basic auth with the key as user name (what curl -u sends).
func apiKey(r *http.Request) string {
	if user, _, ok := r.BasicAuth(); ok {
		return user
	}
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(token)
	}
	return ""
}

func (s *Server) acceptsKey(key string) bool {
	if len(s.apiKeys) == 0 {
		return strings.HasPrefix(key, "sk_test_") && len(key) > len("sk_test_")
	}
	return slices.Contains(s.apiKeys, key)
}

func unrecognizedURL(req *apiRequest) result {
	e := invalidRequest("", "", "Unrecognized request URL ("+req.r.Method+": "+req.r.URL.Path+").")
	e.status = http.StatusNotFound
	return rejected(e)
}

// mustMarshal encodes the package's own response types, which always encode.
func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fakestripe: encoding %T: %v", v, err))
	}
	return b
}
