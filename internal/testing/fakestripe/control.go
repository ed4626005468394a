package fakestripe

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// ControlPathPrefix is where the control API lives, a path Stripe does not use. It lets a test
// in another process drive a stand-in run by cmd/fakestripe the way a Go test drives a Server:
//
//	GET  /_fakestripe/faults                         -> {"pending_faults": ["timeout", ...]}
//	POST /_fakestripe/faults  {"kind": "timeout", "count": 2}  (count defaults to 1)
//	POST /_fakestripe/latency {"ms": 250}
//	GET  /_fakestripe/charges[?idempotency_key=K]   -> {"charge_requests": 3, "charges": [...]}
//	POST /_fakestripe/reset
//
// It takes no API key: it is a test harness on a loopback port, not part of Stripe.
const ControlPathPrefix = "/_fakestripe/"

type faultsRequest struct {
	Kind  FaultKind `json:"kind"`
	Count *int      `json:"count"`
}

type faultsResponse struct {
	PendingFaults []FaultKind `json:"pending_faults"`
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

func (s *Server) routeControl() {
	s.mux.HandleFunc("GET "+ControlPathPrefix+"faults", s.controlGetFaults)
	s.mux.HandleFunc("POST "+ControlPathPrefix+"faults", s.controlInjectFaults)
	s.mux.HandleFunc("POST "+ControlPathPrefix+"latency", s.controlSetLatency)
	s.mux.HandleFunc("GET "+ControlPathPrefix+"charges", s.controlCharges)
	s.mux.HandleFunc("POST "+ControlPathPrefix+"reset", s.controlReset)
}

func (s *Server) controlGetFaults(w http.ResponseWriter, r *http.Request) {
	writeControl(w, http.StatusOK, faultsResponse{PendingFaults: s.PendingFaults()})
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
	}
	s.InjectChargeFaults(req.Kind, count)
	writeControl(w, http.StatusOK, faultsResponse{PendingFaults: s.PendingFaults()})
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
