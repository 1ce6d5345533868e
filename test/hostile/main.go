// Command hostile is a test helper, not a shipped command: a lockstep
// device that misbehaves on purpose. The end-to-end tests in test/ build
// it like the lockstep binary, point it at a node on loopback, and assert
// on what the node does and on what this program saw, which it prints as
// JSON lines on stdout (one object per line, its kind in "event").
//
//	hostile -scenario NAME -home DIR -to tcp://127.0.0.1:PORT -device NODE-ID -folder F [flags]
//
// It speaks the real protocol (TLS 1.3 pinned to the node's ID, the Hello
// exchange, then protocol.Conn), with the identity in -home (created if
// missing). It refuses any target but a loopback address. Scenarios
// (scenarios.go has what each does):
//
//	id                    print this identity's device ID and exit
//	observe               a trusted peer sharing -folder that only reports
//	max-counter           announce -files with version counters 2^64-1 and now+100 years
//	ignored-block         request blocks the node must not serve (-probe NAME:SIZE)
//	pull-loop             announce a symlink d and a file d/x under it
//	flood-handshakes      -count TLS handshakes from fresh identities
//	flood-index           -messages Index messages of -records tiny records each
//	bad-polynomial        announce the folder's polynomial fixed as 0x3
//	modes                 announce a file of mode 0o7777 and names with escape sequences
//	receiver-claims-huge  act as an untrusted receiver claiming -claim of the node's records
//
// Every scenario but id and flood-handshakes stays connected for
// -duration after its attack (or until SIGTERM), serving the blocks of
// what it announced and reporting what the node sends.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"lockstep/crypt"
	"lockstep/sync/discover"
)

// config is the command line.
type config struct {
	scenario string
	home     string
	to       string // host:port, loopback only
	node     crypt.DeviceID
	folder   string
	duration time.Duration

	files    []string // max-counter
	probes   []probe  // ignored-block
	announce string   // ignored-block: the announced file to request
	count    int      // flood-handshakes
	parallel int      // flood-handshakes
	messages int      // flood-index
	records  int      // flood-index
	claim    int64    // receiver-claims-huge
	withIgn  bool     // pull-loop
}

// probe is a block request by name for a file the node must not serve.
type probe struct {
	name string
	size uint32
}

type probeList []probe

func (p *probeList) String() string { return fmt.Sprint(*p) }

func (p *probeList) Set(s string) error {
	name, size, ok := strings.Cut(s, ":")
	n, err := strconv.ParseUint(size, 10, 32)
	if !ok || name == "" || err != nil || n == 0 {
		return fmt.Errorf("want NAME:SIZE, got %q", s)
	}
	*p = append(*p, probe{name, uint32(n)})
	return nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := newOutput(os.Stdout)
	if err := run(ctx, cfg, out); err != nil && !errors.Is(err, context.Canceled) {
		out.emit("error", map[string]any{"err": err.Error()})
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("hostile", flag.ContinueOnError)
	var (
		cfg           config
		to, device    string
		files         string
		probes        probeList
		claimOverride string
	)
	fs.StringVar(&cfg.scenario, "scenario", "", "what to do (see the package comment)")
	fs.StringVar(&cfg.home, "home", "", "directory of this device's identity (created if missing)")
	fs.StringVar(&to, "to", "", "the node's sync address, tcp://127.0.0.1:PORT (loopback only)")
	fs.StringVar(&device, "device", "", "the node's device ID")
	fs.StringVar(&cfg.folder, "folder", "", "the folder ID")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to stay connected after the attack")
	fs.StringVar(&files, "files", "max.txt,future.txt", "max-counter: the node's files to announce newer versions of (comma-separated; the first gets 2^64-1, the others now+100 years)")
	fs.Var(&probes, "probe", "ignored-block: NAME:SIZE of a block to request from offset 0 (repeatable)")
	fs.StringVar(&cfg.announce, "announced", "a.txt", "ignored-block: a file the node announced, requested at its block and at others")
	fs.IntVar(&cfg.count, "count", 1200, "flood-handshakes: how many fresh identities connect")
	fs.IntVar(&cfg.parallel, "parallel", 8, "flood-handshakes: how many at once")
	fs.IntVar(&cfg.messages, "messages", 3, "flood-index: how many Index messages")
	fs.IntVar(&cfg.records, "records", 1_500_000, "flood-index: records per message (fewer if they would not fit a frame)")
	fs.StringVar(&claimOverride, "claim", "", "receiver-claims-huge: the counter claimed (default 2^63-101)")
	fs.BoolVar(&cfg.withIgn, "with-ignore", false, "pull-loop: also announce a .lockstepignore of \"*\"")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.scenario == "" {
		return nil, errors.New("-scenario is required")
	}
	if _, ok := scenarios[cfg.scenario]; !ok {
		return nil, fmt.Errorf("unknown scenario %q", cfg.scenario)
	}
	if cfg.home == "" && cfg.scenario != "flood-handshakes" {
		return nil, errors.New("-home is required")
	}
	for f := range strings.SplitSeq(files, ",") {
		if f != "" {
			cfg.files = append(cfg.files, f)
		}
	}
	cfg.probes = probes
	cfg.claim = 1<<63 - 101
	if claimOverride != "" {
		n, err := strconv.ParseInt(claimOverride, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-claim %q: want a positive int64", claimOverride)
		}
		cfg.claim = n
	}
	if cfg.count < 1 || cfg.parallel < 1 || cfg.messages < 1 || cfg.records < 1 {
		return nil, errors.New("-count, -parallel, -messages and -records must be positive")
	}
	if cfg.scenario == "id" {
		return &cfg, nil
	}
	addr, err := discover.ParseAddress(to)
	if err != nil {
		return nil, fmt.Errorf("-to: %w", err)
	}
	if addr.Scheme != discover.SchemeTCP || !addr.IP.IsValid() || !addr.IP.IsLoopback() {
		return nil, fmt.Errorf("-to %q: only a tcp:// address on a loopback IP is allowed", to)
	}
	cfg.to = strings.TrimPrefix(addr.String(), "tcp://")
	if cfg.node, err = crypt.ParseDeviceID(device); err != nil {
		return nil, fmt.Errorf("-device: %w", err)
	}
	if cfg.folder == "" && cfg.scenario != "flood-handshakes" {
		return nil, errors.New("-folder is required")
	}
	return &cfg, nil
}

// run plays the scenario.
func run(ctx context.Context, cfg *config, out *output) error {
	if cfg.scenario == "flood-handshakes" {
		return floodHandshakes(ctx, cfg, out)
	}
	id, _, err := crypt.LoadOrCreateIdentity(cfg.home, "hostile")
	if err != nil {
		return err
	}
	if cfg.scenario == "id" {
		out.emit("id", map[string]any{"id": id.ID.String(), "short": uint64(id.ID.Short())})
		return nil
	}
	return scenarios[cfg.scenario](ctx, cfg, id, out)
}
