//go:build linux

package chaos

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var (
	longFlag = flag.Bool("chaos.long", false, "run the long form of every scenario (also LOCKSTEP_CHAOS=long)")
	seedFlag = flag.Uint64("chaos.seed", 0, "seed of every random choice (also LOCKSTEP_CHAOS_SEED; 0: from the clock)")
)

// binary is the lockstep binary under test, built by TestMain.
var binary string

// seed is the run's seed; each scenario derives its own from it.
var seed uint64

// client is the HTTP client of every REST call, closed when the tests end
// so that no idle connection's goroutine outlives them.
var (
	transport = &http.Transport{MaxIdleConnsPerHost: 4}
	client    = &http.Client{Transport: transport, Timeout: 30 * time.Second}
)

func TestMain(m *testing.M) {
	flag.Parse()
	seed = *seedFlag
	if s := os.Getenv("LOCKSTEP_CHAOS_SEED"); seed == 0 && s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "LOCKSTEP_CHAOS_SEED:", err)
			os.Exit(2)
		}
		seed = v
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	if testing.Short() {
		// Every scenario skips; don't build anything.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "lockstep-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "lockstep")
	args := []string{"build", "-o", binary}
	if os.Getenv("LOCKSTEP_RACE") != "" {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../../cmd/lockstep")...)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building lockstep:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	transport.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// long reports whether the long form was asked for.
func long() bool {
	return *longFlag || os.Getenv("LOCKSTEP_CHAOS") == "long"
}

// scenarioRand returns the random source of one scenario, derived from the
// run's seed and the scenario's name, and logs how to rerun it.
func scenarioRand(t *testing.T) *rand.Rand {
	t.Helper()
	var h uint64 = 14695981039346656037
	for _, c := range []byte(t.Name()) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	t.Logf("seed %d (rerun: go test ./test/chaos -run '^%s$' -chaos.seed %d -v)", seed, t.Name(), seed)
	return rand.New(rand.NewPCG(seed, h))
}

// endToEnd skips the scenario under -short.
func endToEnd(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("chaos scenario: end to end")
	}
}
