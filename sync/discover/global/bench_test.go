package global

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"lockstep/crypt"
	"lockstep/sync/discover"
)

func BenchmarkParseAnnouncement(b *testing.B) {
	body := []byte(`{"addresses": ["tcp://0.0.0.0:22100", "tcp://[::]:22100", "relay://192.0.2.1:22067/?id=` + testRelayID + `"]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		a, err := parseAnnouncement(body)
		if err != nil {
			b.Fatal(err)
		}
		resolveAddresses(a.Addresses, netip.MustParseAddr("192.0.2.9"))
	}
}

// BenchmarkRegistry measures a put and a get of one device among 100,000,
// and reports the heap each entry takes.
func BenchmarkRegistry(b *testing.B) {
	const devices = 100000
	addrs := []string{"tcp://192.0.2.9:22100", "relay://192.0.2.1:22067/?id=" + testRelayID}
	now := time.Now()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := newRegistry(time.Hour, devices, DefaultMaxPerSource)
	ids := make([]crypt.DeviceID, devices)
	srcs := make([]netip.Prefix, devices)
	for i := range ids {
		binary.BigEndian.PutUint64(ids[i][:], uint64(i))
		srcs[i] = discover.Source(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
		if _, err := r.put(ids[i], addrs, srcs[i], now); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perEntry := (float64(after.HeapAlloc) - float64(before.HeapAlloc) - devices*float64(len(crypt.DeviceID{})+int(unsafe.Sizeof(netip.Prefix{})))) / devices
	i := 0
	for b.Loop() {
		id := ids[i%devices]
		if _, err := r.put(id, addrs, srcs[i%devices], now); err != nil {
			b.Fatal(err)
		}
		if _, _, ok := r.get(id, now); !ok {
			b.Fatal("not found")
		}
		i++
	}
	b.ReportMetric(perEntry, "heapB/entry") // after Loop, which resets metrics
}
