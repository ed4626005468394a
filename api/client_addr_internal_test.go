package api

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	for _, tt := range []struct {
		name, peer string
		forwarded  []string
		trusted    []netip.Prefix
		want       string
	}{
		{"NoProxiesIgnoresTheHeader", "203.0.113.9:4000", []string{"198.51.100.7"}, nil, "203.0.113.9"},
		{"UntrustedPeerIgnoresTheHeader", "203.0.113.9:4000", []string{"198.51.100.7"}, proxies, "203.0.113.9"},
		{"TrustedPeerNamesTheClient", "10.1.2.3:4000", []string{"198.51.100.7"}, proxies, "198.51.100.7"},
		{"SkipsEveryTrustedHop", "10.1.2.3:4000", []string{"198.51.100.7, 10.9.9.9"}, proxies, "198.51.100.7"},
		{"TheClientsOwnHopsProveNothing", "10.1.2.3:4000", []string{"192.0.2.66, 198.51.100.7"}, proxies, "198.51.100.7"},
		{"SeveralHeaders", "10.1.2.3:4000", []string{"192.0.2.66", "198.51.100.7, 10.4.4.4"}, proxies, "198.51.100.7"},
		{"GarbageEndsTheWalk", "10.1.2.3:4000", []string{"198.51.100.7, not-an-address, 10.4.4.4"}, proxies, "10.4.4.4"},
		{"NoHeaderIsThePeer", "10.1.2.3:4000", nil, proxies, "10.1.2.3"},
		{"IPv6", "[2001:db8::1]:4000", []string{"2001:db8:ffff::1, 2001:db9::5"}, proxies, "2001:db9::5"},
		{"MappedIPv4", "[::ffff:10.1.2.3]:4000", []string{"198.51.100.7"}, proxies, "198.51.100.7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &http.Request{RemoteAddr: tt.peer, Header: http.Header{}}
			for _, v := range tt.forwarded {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientAddr(r, tt.trusted); got != netip.MustParseAddr(tt.want) {
				t.Fatalf("want %s, got %s", tt.want, got)
			}
		})
	}
}
