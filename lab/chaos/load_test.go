package main

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestRoundRobin(t *testing.T) {
	t.Parallel()
	var hits []string
	servers := make([]string, 3)
	for i := range servers {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits = append(hits, strconv.Itoa(i)) // the requests below are sequential
		}))
		defer srv.Close()
		servers[i] = strings.TrimPrefix(srv.URL, "http://")
	}
	client := &http.Client{Transport: &roundRobin{hosts: servers, base: http.DefaultTransport}}
	for range 6 {
		resp, err := client.Get("http://" + servers[0] + "/rides")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := strings.Join(hits, ""); got != "120120" {
		t.Errorf("want attempts to go round the replicas, got %s", got)
	}
}
