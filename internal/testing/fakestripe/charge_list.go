package fakestripe

import (
	"net/http"
	"slices"
)

// chargeListParams are the parameters Stripe's GET /v1/charges takes. created, payment_intent
// and transfer_group filters are accepted and ignored.
var chargeListParams = []string{
	"created", "customer", "ending_before", "expand", "limit", "payment_intent",
	"starting_after", "transfer_group",
}

// Stripe's page size bounds for list endpoints.
const (
	defaultListLimit = 10
	maxListLimit     = 100
)

// listObject is Stripe's envelope for a page of a list, newest first.
type listObject struct {
	Object  string         `json:"object"`
	Data    []chargeObject `json:"data"`
	HasMore bool           `json:"has_more"`
	URL     string         `json:"url"`
}

// listCharges pages through charges newest first. It honours starting_after and ending_before
// because stripe-go's iterator follows has_more with them; without them it would loop forever.
func (s *Server) listCharges(req *apiRequest) result {
	p := req.params
	if e := checkParams(p, chargeListParams); e != nil {
		return rejected(e)
	}
	limit, ok, e := intParam(p, "limit")
	switch {
	case e != nil:
		return rejected(e)
	case !ok:
		limit = defaultListLimit
	case limit < 1:
		return rejected(invalidRequest("", "limit", "This value must be greater than or equal to 1."))
	case limit > maxListLimit:
		return rejected(invalidRequest("", "limit", "This value must be less than or equal to 100."))
	}
	customerID := p.Get("customer")

	s.mu.Lock()
	defer s.mu.Unlock()

	if _, ok := s.customers[customerID]; customerID != "" && !ok {
		return rejected(noSuchResource(http.StatusBadRequest, "customer", "customer", customerID))
	}
	var newestFirst []*Charge
	for _, ch := range slices.Backward(s.charges) {
		if customerID == "" || ch.Customer == customerID {
			newestFirst = append(newestFirst, ch)
		}
	}

	page, hasMore, e := paginate(newestFirst, int(limit), p.Get("starting_after"), p.Get("ending_before"))
	if e != nil {
		return rejected(e)
	}
	list := listObject{Object: "list", Data: make([]chargeObject, 0, len(page)), HasMore: hasMore, URL: "/v1/charges"}
	for _, ch := range page {
		list.Data = append(list.Data, ch.object())
	}
	return succeeded(list)
}

// paginate cuts one page out of charges (newest first) the way Stripe does: the limit charges
// just after startingAfter, or just before endingBefore, or the first limit.
func paginate(charges []*Charge, limit int, startingAfter, endingBefore string) (page []*Charge, hasMore bool, e *apiError) {
	indexOf := func(param, id string) (int, *apiError) {
		i := slices.IndexFunc(charges, func(ch *Charge) bool { return ch.ID == id })
		if i < 0 {
			return 0, noSuchResource(http.StatusBadRequest, "charge", param, id)
		}
		return i, nil
	}

	switch {
	case startingAfter != "":
		i, e := indexOf("starting_after", startingAfter)
		if e != nil {
			return nil, false, e
		}
		rest := charges[i+1:]
		return rest[:min(limit, len(rest))], len(rest) > limit, nil
	case endingBefore != "":
		i, e := indexOf("ending_before", endingBefore)
		if e != nil {
			return nil, false, e
		}
		before := charges[:i]
		return before[max(0, len(before)-limit):], len(before) > limit, nil
	default:
		return charges[:min(limit, len(charges))], len(charges) > limit, nil
	}
}
