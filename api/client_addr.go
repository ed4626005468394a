package api

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// clientAddr is the address of the client that sent r: what a ride's audit trail records. It is
// the TCP peer, unless the peer is one of trustedProxies (a load balancer of ours). Then X-Forwarded-For is read from its right end,
// where our proxies appended what they saw, past every hop that is itself a trusted proxy: the
// first other address is the client. Anything left of it was written by the client and proves
// nothing; a hop that is not an address ends the walk at the last address known, so that a
// client cannot pass itself off as another. With no trusted proxies, X-Forwarded-For is ignored,
// since any client can send one.
func clientAddr(r *http.Request, trustedProxies []netip.Prefix) netip.Addr {
	addrPort, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.IPv4Unspecified()
	}
	addr := addrPort.Addr().Unmap()
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0 && trusted(addr, trustedProxies); i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		addr = hop.Unmap()
	}
	return addr
}

func trusted(addr netip.Addr, proxies []netip.Prefix) bool {
	return slices.ContainsFunc(proxies, func(p netip.Prefix) bool { return p.Contains(addr) })
}
