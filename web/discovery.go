package web

import (
	"net/http"
	"sort"
	"time"

	"github.com/labstack/echo/v4"
)

// Discovery is what the API needs from the node's discovery parts.
type Discovery interface {
	// Report describes the discovery parts; Nearby holds every device
	// seen on the LAN, known or not.
	Report() DiscoveryStatus
}

// DiscoveryStatus is GET /rest/discovery and Status.Discovery.
type DiscoveryStatus struct {
	// LocalDiscovery is whether LAN announcements are on.
	LocalDiscovery bool `json:"localDiscovery"`
	// Nearby lists devices announcing themselves on the LAN that this
	// node does not know yet: the ones a user may want to add.
	Nearby []NearbyDevice `json:"nearby"`
	// Servers are the global discovery services this node announces to.
	Servers []DiscoveryServer `json:"servers"`
	// Relays are the relays this node is reachable through.
	Relays []RelayStatus `json:"relays"`
	// DiscoveryService and RelayService are set when this node runs them.
	DiscoveryService *DiscoveryService `json:"discoveryService,omitempty"`
	RelayService     *RelayService     `json:"relayService,omitempty"`
}

// NearbyDevice is a device heard on the LAN.
type NearbyDevice struct {
	ID        string    `json:"id"`
	Addresses []string  `json:"addresses"`
	LastSeen  time.Time `json:"lastSeen"`
}

// DiscoveryServer is a global discovery service this node uses.
type DiscoveryServer struct {
	URL          string     `json:"url"`
	LastAnnounce *time.Time `json:"lastAnnounce,omitempty"`
	Error        string     `json:"error,omitempty"`
}

// RelayStatus is a relay this node registers with.
type RelayStatus struct {
	URL        string `json:"url"`
	Registered bool   `json:"registered"`
	Error      string `json:"error,omitempty"`
}

// DiscoveryService is the discovery service this node runs.
type DiscoveryService struct {
	URL     string `json:"url"`
	Devices int    `json:"devices"`
}

// RelayService is the relay this node runs.
type RelayService struct {
	URL        string `json:"url"`
	Registered int    `json:"registered"`
	Sessions   int    `json:"sessions"`
	Bytes      int64  `json:"bytes"`
}

// discoveryStatus is the node's discovery report with the known devices
// devs (and this one) left out of Nearby; nil when the node has no
// discovery. devs is the caller's device list, so a page refresh reads the
// devices once.
func (s *Server) discoveryStatus(devs []DeviceStatus) *DiscoveryStatus {
	if s.cfg.Discovery == nil {
		return nil
	}
	st := s.cfg.Discovery.Report()
	known := map[string]bool{s.cfg.ID.String(): true}
	for _, d := range devs {
		known[d.ID] = true
	}
	nearby := make([]NearbyDevice, 0, len(st.Nearby))
	for _, n := range st.Nearby {
		if !known[n.ID] {
			nearby = append(nearby, n)
		}
	}
	sort.Slice(nearby, func(i, j int) bool { return nearby[i].ID < nearby[j].ID })
	st.Nearby = nearby
	if st.Servers == nil {
		st.Servers = []DiscoveryServer{}
	}
	if st.Relays == nil {
		st.Relays = []RelayStatus{}
	}
	return &st
}

func (s *Server) getDiscovery(c echo.Context) error {
	devs, err := s.deviceStatus(c)
	if err != nil {
		return err
	}
	st := s.discoveryStatus(devs)
	if st == nil {
		st = &DiscoveryStatus{Nearby: []NearbyDevice{}, Servers: []DiscoveryServer{}, Relays: []RelayStatus{}}
	}
	return c.JSON(http.StatusOK, st)
}
