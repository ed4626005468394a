package fakestripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// ControlPathPrefix is where the control API lives, a path Stripe does not use. It lets a test
// in another process drive a stand-in run by cmd/fakestripe the way a Go test drives a Server:
//
//	GET  /_fakestripe/faults                         -> {"pending_faults": ["timeout", ...], "pending_refund_faults": [...]}
//	POST /_fakestripe/faults  {"kind": "timeout", "count": 2}  (count defaults to 1)
//	POST /_fakestripe/faults  {"kind": "charge_then_drop", "on": "refunds"}  (on defaults to charges)
//	POST /_fakestripe/latency {"ms": 250}
//	GET  /_fakestripe/charges[?idempotency_key=K]   -> {"charge_requests": 3, "charges": [...]}
//	GET  /_fakestripe/refunds[?charge=ch_...]       -> {"refunds": [...]}
//	POST /_fakestripe/charges/{id}/refund           -> the refund, as Stripe's API shows it
//	POST /_fakestripe/charges/{id}/dispute          -> the dispute, as Stripe's API shows it
//	POST /_fakestripe/webhooks {"duplicate": 1, "reorder": true, "reorder_window_ms": 5000, "delay_ms": 100}
//	GET  /_fakestripe/webhooks                       -> {"url": ..., "behavior": {...}, "events": [...], "deliveries": [...]}
//	POST /_fakestripe/reset
//
// The charge actions are the dashboard's refund and a rider's bank's dispute (see RefundCharge
// and DisputeCharge); one refused answers 404 for an unknown charge and 409 otherwise, with
// {"error": message, "code": Stripe's code, if it has one}. POST /_fakestripe/webhooks sets the
// behaviour of deliveries to come (see WebhookBehavior; fields left out are zero) and answers
// it; GET lists every event emitted, each the Stripe Event object delivered, and every delivery
// attempt (see WebhookDelivery).
//
// It takes no API key: it is a test harness on a loopback port, not part of Stripe.
const ControlPathPrefix = "/_fakestripe/"

type faultsRequest struct {
	Kind  FaultKind `json:"kind"`
	Count *int      `json:"count"`
	On    string    `json:"on"` // "charges" (the default) or "refunds"
}

type faultsResponse struct {
	PendingFaults       []FaultKind `json:"pending_faults"`
	PendingRefundFaults []FaultKind `json:"pending_refund_faults"`
}

type latencyRequest struct {
	MS int64 `json:"ms"`
}

type latencyResponse struct {
	LatencyMS int64 `json:"latency_ms"`
}

type chargesResponse struct {
	ChargeRequests int      `json:"charge_requests"`
	Charges        []Charge `json:"charges"`
}

// refundsResponse lists refunds, oldest first: those of the API and the dashboard's alike, told
// apart by their idempotency key (the dashboard sends none).
type refundsResponse struct {
	Refunds []Refund `json:"refunds"`
}

func (s *Server) routeControl() {
	s.mux.HandleFunc("GET "+ControlPathPrefix+"faults", s.controlGetFaults)
	s.mux.HandleFunc("POST "+ControlPathPrefix+"faults", s.controlInjectFaults)
	s.mux.HandleFunc("POST "+ControlPathPrefix+"latency", s.controlSetLatency)
	s.mux.HandleFunc("GET "+ControlPathPrefix+"charges", s.controlCharges)
	s.mux.HandleFunc("GET "+ControlPathPrefix+"refunds", s.controlRefunds)
	s.mux.HandleFunc("POST "+ControlPathPrefix+"charges/{id}/refund", s.controlRefundCharge)
	s.mux.HandleFunc("POST "+ControlPathPrefix+"charges/{id}/dispute", s.controlDisputeCharge)
	s.mux.HandleFunc("GET "+ControlPathPrefix+"webhooks", s.controlGetWebhooks)
	s.mux.HandleFunc("POST "+ControlPathPrefix+"webhooks", s.controlSetWebhooks)
	s.mux.HandleFunc("POST "+ControlPathPrefix+"reset", s.controlReset)
}

func (s *Server) controlGetFaults(w http.ResponseWriter, r *http.Request) {
	writeControl(w, http.StatusOK, s.faultsResponse())
}

// faultsResponse is every fault still queued, for charges and for refunds: a harness that
// queued refund faults learns from it how many struck.
func (s *Server) faultsResponse() faultsResponse {
	res := faultsResponse{PendingFaults: s.PendingFaults()}
	s.mu.Lock()
	res.PendingRefundFaults = slices.Clone(s.pendingRefundFaults)
	s.mu.Unlock()
	return res
}

func (s *Server) controlInjectFaults(w http.ResponseWriter, r *http.Request) {
	var req faultsRequest
	if err := decodeControl(r, &req); err != nil {
		writeControlError(w, err)
		return
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
	}
	switch {
	case !slices.Contains(faultKinds, req.Kind):
		writeControlError(w, fmt.Errorf("unknown fault kind %q, want one of %q", req.Kind, faultKinds))
		return
	case count < 1:
		writeControlError(w, fmt.Errorf("count must be at least 1, got %d", count))
		return
	case req.On != "" && req.On != "charges" && req.On != "refunds":
		writeControlError(w, fmt.Errorf(`on must be "charges" or "refunds", got %q`, req.On))
		return
	}
	if req.On == "refunds" {
		s.InjectRefundFaults(req.Kind, count)
	} else {
		s.InjectChargeFaults(req.Kind, count)
	}
	writeControl(w, http.StatusOK, s.faultsResponse())
}

func (s *Server) controlSetLatency(w http.ResponseWriter, r *http.Request) {
	var req latencyRequest
	if err := decodeControl(r, &req); err != nil {
		writeControlError(w, err)
		return
	}
	if req.MS < 0 {
		writeControlError(w, fmt.Errorf("ms must not be negative, got %d", req.MS))
		return
	}
	s.SetLatency(time.Duration(req.MS) * time.Millisecond)
	writeControl(w, http.StatusOK, latencyResponse{LatencyMS: req.MS})
}

func (s *Server) controlCharges(w http.ResponseWriter, r *http.Request) {
	res := chargesResponse{ChargeRequests: s.ChargeRequests()}
	if key := r.URL.Query().Get("idempotency_key"); key != "" {
		res.Charges = s.ChargesForIdempotencyKey(key)
	} else {
		res.Charges = s.Charges()
	}
	writeControl(w, http.StatusOK, res)
}

func (s *Server) controlRefunds(w http.ResponseWriter, r *http.Request) {
	res := refundsResponse{Refunds: []Refund{}}
	charge := r.URL.Query().Get("charge")
	for _, rf := range s.Refunds() {
		if charge == "" || rf.Charge == charge {
			res.Refunds = append(res.Refunds, rf)
		}
	}
	writeControl(w, http.StatusOK, res)
}

func (s *Server) controlRefundCharge(w http.ResponseWriter, r *http.Request) {
	rf, err := s.RefundCharge(r.PathValue("id"))
	if err != nil {
		writeActionError(w, err)
		return
	}
	writeControl(w, http.StatusOK, rf.object())
}

func (s *Server) controlDisputeCharge(w http.ResponseWriter, r *http.Request) {
	dp, err := s.DisputeCharge(r.PathValue("id"))
	if err != nil {
		writeActionError(w, err)
		return
	}
	writeControl(w, http.StatusOK, dp.object())
}

// webhookBehaviorJSON is a WebhookBehavior in the control API.
type webhookBehaviorJSON struct {
	Duplicate       int   `json:"duplicate"`
	Reorder         bool  `json:"reorder"`
	ReorderWindowMS int64 `json:"reorder_window_ms"`
	DelayMS         int64 `json:"delay_ms"`
}

type webhooksResponse struct {
	URL        string              `json:"url"` // empty: events are recorded, not delivered
	Behavior   webhookBehaviorJSON `json:"behavior"`
	Events     []json.RawMessage   `json:"events"`
	Deliveries []WebhookDelivery   `json:"deliveries"`
}

func (s *Server) controlGetWebhooks(w http.ResponseWriter, r *http.Request) {
	res := webhooksResponse{
		URL:        s.webhooks.url,
		Behavior:   behaviorJSON(s.webhookBehavior()),
		Events:     []json.RawMessage{},
		Deliveries: s.WebhookDeliveries(),
	}
	for _, ev := range s.WebhookEvents() {
		res.Events = append(res.Events, ev.Payload)
	}
	if res.Deliveries == nil {
		res.Deliveries = []WebhookDelivery{}
	}
	writeControl(w, http.StatusOK, res)
}

func (s *Server) controlSetWebhooks(w http.ResponseWriter, r *http.Request) {
	var req webhookBehaviorJSON
	if err := decodeControl(r, &req); err != nil {
		writeControlError(w, err)
		return
	}
	if req.Duplicate < 0 || req.ReorderWindowMS < 0 || req.DelayMS < 0 {
		writeControlError(w, fmt.Errorf("duplicate, reorder_window_ms and delay_ms must not be negative, got %+v", req))
		return
	}
	s.SetWebhookBehavior(WebhookBehavior{
		Duplicate:     req.Duplicate,
		Reorder:       req.Reorder,
		ReorderWindow: time.Duration(req.ReorderWindowMS) * time.Millisecond,
		Delay:         time.Duration(req.DelayMS) * time.Millisecond,
	})
	writeControl(w, http.StatusOK, behaviorJSON(s.webhookBehavior()))
}

func behaviorJSON(b WebhookBehavior) webhookBehaviorJSON {
	return webhookBehaviorJSON{
		Duplicate: b.Duplicate, Reorder: b.Reorder,
		ReorderWindowMS: b.ReorderWindow.Milliseconds(), DelayMS: b.Delay.Milliseconds(),
	}
}

func (s *Server) controlReset(w http.ResponseWriter, r *http.Request) {
	s.Reset()
	w.WriteHeader(http.StatusNoContent)
}

func decodeControl(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("error decoding JSON body: %w", err)
	}
	return nil
}

func writeControl(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(mustMarshal(v)) // the client hung up; nothing left to tell it
}

func writeControlError(w http.ResponseWriter, err error) {
	writeControl(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
}

// writeActionError answers a refused dashboard action with its status and Stripe's code, and any
// other error, such as a journal that failed, with a 500.
func writeActionError(w http.ResponseWriter, err error) {
	var refused *RefusalError
	if !errors.As(err, &refused) {
		writeControl(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	body := map[string]string{"error": refused.Message}
	if refused.Code != "" {
		body["code"] = refused.Code
	}
	writeControl(w, refused.status(), body)
}
