package web

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// The console answers only to the names it is known by. A web page the
// user visits can make its own name resolve to 127.0.0.1 (DNS rebinding)
// and then talk to the console as a same-origin page: every request the
// browser sends then carries the page's name in Host. So a request is
// served only when its Host is
//
//   - an IP address: a loopback one, the one the console is bound to, or
//     any when it is bound to every address (an IP literal cannot be
//     rebound);
//   - localhost, or a name given in Config.Hosts (serve --gui-host);
//
// with the console's port, or no port when it is a name or the console's
// port is the scheme's default (a configured NAME:PORT takes that port). Everything else, on every route,
// is refused with 421 Misdirected Request.

// misdirected is the error message of a request refused for its Host.
const misdirected = "misdirected request: this console answers only to its own address, localhost and the names given with 'serve --gui-host'"

// hostPolicy decides which Host headers the console answers to.
type hostPolicy struct {
	// port is the port the console listens on.
	port string
	// bound is the IP the console is bound to; nil or unspecified for
	// every address.
	bound net.IP
	// defaultPort is the scheme's default port ("80" or "443").
	defaultPort string
	// names are the configured names, lower case, each with or without a
	// port.
	names map[string]bool
}

// newHostPolicy is the policy of a console listening on addr (the bound
// HOST:PORT), with the configured names.
func newHostPolicy(addr net.Addr, https bool, names []string) hostPolicy {
	p := hostPolicy{defaultPort: "80", names: map[string]bool{}}
	if https {
		p.defaultPort = "443"
	}
	if ta, ok := addr.(*net.TCPAddr); ok {
		p.port, p.bound = strconv.Itoa(ta.Port), ta.IP
	}
	for _, n := range names {
		n = strings.ToLower(strings.TrimSpace(n))
		if h, port, err := net.SplitHostPort(n); err == nil {
			p.names[strings.TrimSuffix(h, ".")+":"+port] = true
		} else {
			p.names[strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(n, "["), "]"), ".")] = true
		}
	}
	return p
}

// CheckGUIHost checks a --gui-host value: a DNS name or IP address,
// optionally with a port.
func CheckGUIHost(name string) error {
	host := name
	if h, port, err := net.SplitHostPort(name); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("invalid --gui-host %q: bad port", name)
		}
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if host == "" || strings.ContainsAny(host, "/@?#[] \t") {
		return fmt.Errorf("invalid --gui-host %q: want a name or NAME:PORT", name)
	}
	return nil
}

// allows reports whether a request with Host header host is for this
// console.
func (p hostPolicy) allows(host string) bool {
	host = strings.ToLower(host)
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		// No port, or a bare IPv6 literal in brackets.
		name, port = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ""
	}
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return false
	}
	if (p.names[name] || name == "localhost") && (port == "" || port == p.port) || port != "" && p.names[name+":"+port] {
		return true
	}
	if port != p.port && (port != "" || p.port != p.defaultPort) {
		return false
	}
	ip := net.ParseIP(name)
	if ip == nil {
		return false
	}
	return ip.IsLoopback() || p.bound == nil || p.bound.IsUnspecified() || ip.Equal(p.bound)
}

// checkHost refuses, before any route sees it, a request whose Host is
// not one the console answers to.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.hosts.allows(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		s.cfg.Logger.Warn("console refused a request for another host (DNS rebinding?)", "host", r.Host, "client", clientHost(r), "path", r.URL.Path)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusMisdirectedRequest)
		if r.Method != http.MethodHead {
			json.NewEncoder(w).Encode(Error{Error: misdirected})
		}
	})
}
