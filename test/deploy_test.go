package test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"lockstep/storage/blob/s3/s3test"
	"lockstep/test/testutil"
)

// The deployment files (deploy/, Dockerfile, .dockerignore) are checked
// against the binary they run: a flag renamed in the code but not in them
// fails here, not on a user's receiver. docker itself is not needed: the
// compose receiver's command runs through the image's entrypoint script on
// loopback, with a real S3 server.

// repoRoot is the repository root, seen from test/.
const repoRoot = ".."

// deployInvocation is one way a deployment file runs lockstep.
type deployInvocation struct {
	where string   // the file and the part of it, for messages
	args  []string // lockstep's arguments: subcommand words, then flags
}

// composeFile is the part of a compose file the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
	Volumes map[string]any `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Entrypoint  any               `yaml:"entrypoint"`
	Command     any               `yaml:"command"`
	Restart     string            `yaml:"restart"`
	EnvFile     []string          `yaml:"env_file"`
	Environment map[string]string `yaml:"environment"`
	Secrets     []string          `yaml:"secrets"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	Healthcheck any               `yaml:"healthcheck"`
	StopGrace   string            `yaml:"stop_grace_period"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

// lockstep reports whether the service runs the image built from this
// repository.
func (s composeService) lockstep() bool { return s.Build != nil }

// composeWords is a compose command or entrypoint as a list of words.
func composeWords(t *testing.T, v any) []string {
	t.Helper()
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, w := range v {
			s, ok := w.(string)
			if !ok {
				t.Fatalf("compose command word %v is not a string", w)
			}
			out = append(out, s)
		}
		return out
	}
	t.Fatalf("compose command %v: want a string or a list", v)
	return nil
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		// KnownFields: a key the struct lacks is named here, so a new
		// compose key is either read by these tests or added knowingly.
		t.Fatalf("deploy/compose.yaml: %v", err)
	}
	return c
}

// systemdUnit is a parsed systemd unit: section -> key -> values in order.
type systemdUnit map[string]map[string][]string

// readUnit parses a systemd unit file: [Section] headers, Key=Value
// lines, comments starting with # or ;, and lines continued by a trailing
// backslash.
func readUnit(t *testing.T, path string) systemdUnit {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := systemdUnit{}
	section := ""
	var cont string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if cont != "" {
			line, cont = cont+" "+line, ""
		}
		if strings.HasSuffix(line, "\\") {
			cont = strings.TrimSuffix(line, "\\")
			continue
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.TrimSpace(k) == "" {
				t.Fatalf("%s:%d: not a Key=Value line in a section: %q", path, i+1, line)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	if cont != "" {
		t.Fatalf("%s: ends in a continued line", path)
	}
	return u
}

func (u systemdUnit) get(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// readEnvFile reads KEY=value lines (systemd's EnvironmentFile and
// compose's env_file share this form when values are unquoted).
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(k, " \t") || strings.ContainsAny(v, `"'`) {
			t.Fatalf("%s:%d: want an unquoted KEY=value line, got %q", path, n, line)
		}
		env[k] = v
	}
	return env
}

// exampleOf is the committed example of an environment file a deployment
// reads: deploy/NAME.example for .../NAME.
func exampleOf(t *testing.T, from, path string) string {
	t.Helper()
	ex := filepath.Join(repoRoot, "deploy", filepath.Base(path)+".example")
	if _, err := os.Stat(ex); err != nil {
		t.Fatalf("%s reads %s, but there is no example of it (deploy/%s.example): %v", from, path, filepath.Base(path), err)
	}
	return ex
}

// unitInvocation is how a unit's ExecStart runs lockstep, with $VARS
// expanded from its Environment= lines and the example of its
// EnvironmentFile=.
func unitInvocation(t *testing.T, name string, u systemdUnit) deployInvocation {
	t.Helper()
	where := "deploy/" + name + " ExecStart"
	line := u.get("Service", "ExecStart")
	if line == "" {
		t.Fatalf("deploy/%s has no ExecStart", name)
	}
	if strings.ContainsAny(line, `"'`) {
		t.Fatalf("%s: quotes are more than this test parses: %s", where, line)
	}
	env := map[string]string{}
	for _, e := range u["Service"]["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	for _, f := range u["Service"]["EnvironmentFile"] {
		for k, v := range readEnvFile(t, exampleOf(t, "deploy/"+name, strings.TrimPrefix(f, "-"))) {
			env[k] = v
		}
	}
	fields := strings.Fields(line)
	bin := strings.TrimLeft(fields[0], "-@+!:")
	if filepath.Base(bin) != "lockstep" {
		t.Fatalf("%s runs %s, not lockstep", where, bin)
	}
	var args []string
	for _, f := range fields[1:] {
		if name, ok := strings.CutPrefix(f, "$"); ok {
			name = strings.TrimSuffix(strings.TrimPrefix(name, "{"), "}")
			v, ok := env[name]
			if !ok {
				t.Fatalf("%s uses $%s, which neither the unit nor its environment file's example sets", where, name)
			}
			args = append(args, strings.Fields(v)...)
			continue
		}
		args = append(args, f)
	}
	return deployInvocation{where: where, args: args}
}

// composeInvocations are the commands the compose file gives the lockstep
// image.
func composeInvocations(t *testing.T, c composeFile) []deployInvocation {
	t.Helper()
	var out []deployInvocation
	for name, s := range c.Services {
		if !s.lockstep() {
			continue
		}
		args := composeWords(t, s.Command)
		if len(args) == 0 {
			t.Fatalf("deploy/compose.yaml: service %s has no command", name)
		}
		out = append(out, deployInvocation{where: "deploy/compose.yaml service " + name, args: args})
	}
	if len(out) == 0 {
		t.Fatal("deploy/compose.yaml runs no lockstep service (one with build:)")
	}
	return out
}

var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)`)

// checkFlags fails the test unless every flag inv passes is one the
// subcommand's --help lists and the binary parses the whole command line.
func checkFlags(t *testing.T, inv deployInvocation) {
	t.Helper()
	var sub, flags []string
	for _, a := range inv.args {
		if strings.HasPrefix(a, "-") {
			if name, ok := strings.CutPrefix(a, "--"); ok {
				name, _, _ = strings.Cut(name, "=")
				flags = append(flags, name)
			}
			continue
		}
		if len(flags) == 0 {
			sub = append(sub, a)
		}
	}
	if len(sub) == 0 {
		t.Fatalf("%s: no subcommand in %q", inv.where, inv.args)
	}
	help := run(t, t.TempDir(), append(slices.Clone(sub), "--help")...)
	usage := "lockstep " + strings.Join(sub, " ")
	if help.code != 0 || !strings.Contains(help.stdout, "Usage:\n  "+usage) {
		t.Fatalf("%s: `%s --help` is not a command's help (exit %d):\n%s%s", inv.where, usage, help.code, help.stdout, help.stderr)
	}
	known := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(help.stdout, -1) {
		known[m[1]] = true
	}
	for _, f := range flags {
		if !known[f] {
			t.Errorf("%s passes --%s, which `%s --help` does not list", inv.where, f, usage)
		}
	}
	// The values too: a flag given a value of the wrong kind, or a last
	// flag without the value it needs, fails here (cobra parses every
	// flag before it acts on --help).
	if r := run(t, t.TempDir(), append(slices.Clone(inv.args), "--help")...); r.code != 0 {
		t.Errorf("%s: lockstep does not accept %q: exit %d: %s", inv.where, inv.args, r.code, r.stderr)
	}
}

// TestDeployFlagsExist: every lockstep command line in the compose file,
// the systemd units and their environment file's example uses only flags
// the binary has.
func TestDeployFlagsExist(t *testing.T) {
	invs := composeInvocations(t, readCompose(t))
	for _, name := range []string{"lockstep.service", "lockstep-user.service"} {
		invs = append(invs, unitInvocation(t, name, readUnit(t, filepath.Join(repoRoot, "deploy", name))))
	}
	for _, inv := range invs {
		checkFlags(t, inv)
	}
}

// TestDeployCompose: the compose file restarts what must keep running,
// creates the bucket its receiver uses (by --s3-create-bucket or `mc mb`), reads the S3 keys from an env file
// and the console password from a secret, and publishes the console only
// on the host's loopback.
func TestDeployCompose(t *testing.T) {
	c := readCompose(t)
	oneShot := map[string]bool{}
	for _, s := range c.Services {
		for dep, d := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("depends_on names %s, which is no service", dep)
			}
			if d.Condition == "service_completed_successfully" {
				oneShot[dep] = true
			}
		}
	}
	for name, s := range c.Services {
		switch {
		case oneShot[name]:
		case !slices.Contains([]string{"always", "unless-stopped", "on-failure"}, strings.Split(s.Restart, ":")[0]):
			t.Errorf("service %s has restart %q: it would stay down after a crash or a reboot", name, s.Restart)
		}
		for k, v := range s.Environment {
			if strings.Contains(k, "SECRET") || strings.Contains(k, "PASSWORD") && !strings.HasSuffix(k, "_FILE") || strings.HasPrefix(k, "LOCKSTEP_S3_") {
				t.Errorf("service %s sets %s=%s inline; keys belong in an env_file", name, k, v)
			}
		}
		// Every $$VAR a service's shell reads comes from its env files.
		env := map[string]string{}
		for _, f := range s.EnvFile {
			for k, v := range readEnvFile(t, exampleOf(t, "service "+name, f)) {
				env[k] = v
			}
		}
		for k, v := range s.Environment {
			env[k] = v
		}
		script := strings.Join(append(composeWords(t, s.Entrypoint), composeWords(t, s.Command)...), " ")
		for _, m := range regexp.MustCompile(`\$\$\{?([A-Z_][A-Z0-9_]*)`).FindAllStringSubmatch(script, -1) {
			if _, ok := env[m[1]]; !ok {
				t.Errorf("service %s reads $%s, which neither its environment nor its env_file examples set", name, m[1])
			}
		}
	}

	var recv composeService
	var recvName string
	for name, s := range c.Services {
		if s.lockstep() {
			recv, recvName = s, name
		}
	}
	args := composeWords(t, recv.Command)
	flag := func(name string) string {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
		return ""
	}
	env := map[string]string{}
	for _, f := range recv.EnvFile {
		for k, v := range readEnvFile(t, exampleOf(t, "service "+recvName, f)) {
			env[k] = v
		}
	}
	if flag("s3-endpoint") != "" {
		for _, k := range []string{"LOCKSTEP_S3_ACCESS_KEY", "LOCKSTEP_S3_SECRET_KEY"} {
			if env[k] == "" {
				t.Errorf("the receiver uses S3 but its env_file examples do not set %s", k)
			}
		}
		// The bucket the receiver checks at start is made: the S3 host is
		// a service, and either the receiver creates its bucket
		// (--s3-create-bucket) or a service it waits for runs `mc mb` on
		// that bucket.
		host, _, _ := strings.Cut(flag("s3-endpoint"), ":")
		if _, ok := c.Services[host]; !ok {
			t.Errorf("--s3-endpoint=%s is no service of the compose file", flag("s3-endpoint"))
		}
		bucket := flag("s3-bucket")
		made := slices.Contains(args, "--s3-create-bucket")
		for dep, d := range recv.DependsOn {
			script := strings.Join(composeWords(t, c.Services[dep].Command), " ")
			if d.Condition == "service_completed_successfully" && regexp.MustCompile(`mc mb [^\n]*/`+regexp.QuoteMeta(bucket)+`(\s|$)`).MatchString(script) {
				made = true
			}
		}
		if bucket == "" || !made {
			t.Errorf("no service the receiver waits for creates its bucket %q", bucket)
		}
	}

	// The console: beyond loopback in the container, so it is HTTPS and
	// needs its password, which the entrypoint sets from a secret; on the
	// host, published on loopback.
	gui := flag("gui")
	if !strings.HasPrefix(gui, "0.0.0.0:") {
		t.Fatalf("the receiver's console is on %q: a container's loopback cannot be published", gui)
	}
	port := strings.TrimPrefix(gui, "0.0.0.0:")
	if !slices.Contains(recv.Ports, "127.0.0.1:"+port+":"+port) {
		t.Errorf("the console's port %s is not published on the host's loopback: %q", port, recv.Ports)
	}
	pw := recv.Environment["LOCKSTEP_CONSOLE_PASSWORD_FILE"]
	secret, ok := strings.CutPrefix(pw, "/run/secrets/")
	if !ok || !slices.Contains(recv.Secrets, secret) || c.Secrets[secret].File == "" {
		t.Errorf("LOCKSTEP_CONSOLE_PASSWORD_FILE=%q is not a secret of the receiver's with a file", pw)
	}
	if recv.StopGrace == "" {
		t.Error("the receiver has no stop_grace_period: docker kills it 10 s after SIGTERM, maybe in the middle of its clean stop")
	}
	if !slices.ContainsFunc(recv.Volumes, func(v string) bool { return strings.HasSuffix(v, ":/var/lib/lockstep") }) {
		t.Errorf("the receiver's home /var/lib/lockstep is not a volume: %q", recv.Volumes)
	}
}

// dockerfileInstructions is a Dockerfile's instructions: keyword (upper case) and the
// rest, continuation lines joined and comments dropped.
func dockerfileInstructions(t *testing.T) [][2]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "#") {
			continue
		}
		if strings.HasSuffix(trim, "\\") {
			cur += strings.TrimSuffix(trim, "\\") + " "
			continue
		}
		cur += trim
		if cur = strings.TrimSpace(cur); cur != "" {
			kw, rest, _ := strings.Cut(cur, " ")
			out = append(out, [2]string{strings.ToUpper(kw), strings.TrimSpace(rest)})
		}
		cur = ""
	}
	return out
}

// healthCmd is the shell command of the Dockerfile's HEALTHCHECK.
func healthCmd(t *testing.T) string {
	t.Helper()
	for _, in := range dockerfileInstructions(t) {
		if in[0] == "HEALTHCHECK" {
			_, cmd, ok := strings.Cut(in[1], "CMD ")
			if !ok || strings.HasPrefix(strings.TrimSpace(cmd), "[") {
				t.Fatalf("HEALTHCHECK %s: want the shell form, CMD command", in[1])
			}
			return cmd
		}
	}
	t.Fatal("the Dockerfile has no HEALTHCHECK")
	return ""
}

// TestDockerfile: the image stamps the version, runs as a non-root user
// with its home in a volume, checks its health on /healthz and starts
// through the entrypoint script; and the build context leaves local homes
// and secrets out.
func TestDockerfile(t *testing.T) {
	var user, entrypoint, volume, build string
	args := map[string]bool{}
	copies := map[string]string{}
	for _, in := range dockerfileInstructions(t) {
		switch in[0] {
		case "USER":
			user = in[1]
		case "ENTRYPOINT":
			entrypoint = in[1]
		case "VOLUME":
			volume = in[1]
		case "ARG":
			name, _, _ := strings.Cut(in[1], "=")
			args[name] = true
		case "RUN":
			if strings.Contains(in[1], "go build") {
				build = in[1]
			}
		case "COPY":
			f := strings.Fields(in[1])
			if len(f) >= 2 {
				copies[f[len(f)-1]] = f[len(f)-2]
			}
		}
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "root" || u == "0" {
		t.Errorf("USER %q: the image must not run as root", user)
	}
	if !strings.Contains(volume, "/var/lib/lockstep") {
		t.Errorf("VOLUME %q does not hold the home /var/lib/lockstep", volume)
	}
	for _, want := range []string{"-X main.version=${VERSION}", "-X main.commit=${COMMIT}"} {
		if !strings.Contains(build, want) {
			t.Errorf("the go build does not stamp %s: %s", want, build)
		}
	}
	if !args["VERSION"] || !args["COMMIT"] {
		t.Errorf("build args VERSION and COMMIT are not both declared: %v", args)
	}
	if !regexp.MustCompile(`/healthz\b`).MatchString(healthCmd(t)) {
		t.Errorf("the HEALTHCHECK does not ask /healthz: %s", healthCmd(t))
	}
	script, _, _ := strings.Cut(strings.Trim(entrypoint, `[]" `), `"`)
	if copies[script] == "" {
		// A bare name is found on $PATH: /usr/local/bin in the image.
		script = "/usr/local/bin/" + script
	}
	if copies[script] != "deploy/entrypoint.sh" {
		t.Errorf("ENTRYPOINT %s is not deploy/entrypoint.sh (copied: %v)", entrypoint, copies)
	}

	b, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	ignored := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
			ignored[line] = true
		}
	}
	for _, want := range []string{".home", "**/.home", ".git", "bin", "deploy/*.env", "deploy/console-password"} {
		if !ignored[want] {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
	// The build needs what it copies by name.
	for _, src := range copies {
		if ignored[src] || strings.HasPrefix(src, "test") {
			t.Errorf("the Dockerfile copies %s, which .dockerignore excludes", src)
		}
	}
}

// TestSystemdUnits: the receiver's unit keeps its hardening and reads its
// S3 keys from an environment file; the user unit runs in the user's
// manager. systemd-analyze, where installed, verifies both.
func TestSystemdUnits(t *testing.T) {
	sys := readUnit(t, filepath.Join(repoRoot, "deploy", "lockstep.service"))
	for k, want := range map[string]string{
		"User": "lockstep", "NoNewPrivileges": "true", "ProtectSystem": "strict",
		"ProtectHome": "read-only", "ReadWritePaths": "/var/lib/lockstep", "PrivateTmp": "true",
		"ProtectKernelTunables": "true", "ProtectControlGroups": "true", "RestrictSUIDSGID": "true",
		"LockPersonality": "true", "Environment": "LOCKSTEP_HOME=/var/lib/lockstep", "Restart": "on-failure",
	} {
		if got := sys.get("Service", k); got != want {
			t.Errorf("lockstep.service: %s=%q, want %q", k, got, want)
		}
	}
	if f := sys.get("Service", "EnvironmentFile"); f == "" {
		t.Error("lockstep.service has no EnvironmentFile for the S3 keys")
	} else {
		env := readEnvFile(t, exampleOf(t, "deploy/lockstep.service", strings.TrimPrefix(f, "-")))
		if _, ok := env["LOCKSTEP_S3_SECRET_KEY"]; !ok {
			t.Errorf("the example of %s does not show LOCKSTEP_S3_SECRET_KEY", f)
		}
	}
	user := readUnit(t, filepath.Join(repoRoot, "deploy", "lockstep-user.service"))
	if got := user.get("Install", "WantedBy"); got != "default.target" {
		t.Errorf("lockstep-user.service: WantedBy=%q, want default.target (multi-user.target is never reached in a user manager)", got)
	}
	if user.get("Service", "User") != "" {
		t.Error("lockstep-user.service sets User=, which a user manager cannot")
	}
	if user.get("Service", "Restart") == "" {
		t.Error("lockstep-user.service does not restart")
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed; the units were not verified by systemd")
		return
	}
	for _, name := range []string{"lockstep.service", "lockstep-user.service"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", name))
		if err != nil {
			t.Fatal(err)
		}
		// verify checks that the program exists: the one just built.
		text := strings.NewReplacer("/usr/local/bin/lockstep", binary, "%h/.local/bin/lockstep", binary).Replace(string(b))
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
		// Unknown keys and bad values are warnings with exit 0: any
		// output about the unit is a failure.
		if err != nil || strings.Contains(string(out), name) {
			t.Errorf("systemd-analyze verify %s: %v\n%s", name, err, out)
		}
	}
}

// TestComposeReceiverAsShipped runs the compose file's receiver command,
// as the image would (through deploy/entrypoint.sh, with the console
// password from a file and the S3 keys from the environment), against a
// real S3 server, with only its addresses moved to free loopback ports and
// its S3 endpoint and bucket to the test server's (a bucket that does not
// exist yet, when the command creates its own). Its console then serves
// HTTPS, takes the password from the file, and passes the image's health
// check.
func TestComposeReceiverAsShipped(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed: the image's health check cannot run here")
	}
	invs := composeInvocations(t, readCompose(t))
	if len(invs) != 1 {
		t.Fatalf("the compose file runs %d lockstep services; this test knows one receiver", len(invs))
	}
	args := invs[0].args
	s3 := s3test.Start(t)
	if slices.Contains(args, "--s3-create-bucket") {
		s3.Bucket += "-made-by-the-receiver" // one that does not exist yet
	}
	// Every address moves to a free loopback port (the console keeps its
	// unspecified host: that is what makes it HTTPS); discovery and relay
	// listen on their defaults unless told, so they are told.
	var shipped []string
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "--listen":
			a = "--listen=tcp://127.0.0.1:0"
		case "--gui":
			a = "--gui=0.0.0.0:0"
		case "--s3-endpoint":
			a = "--s3-endpoint=" + s3.Endpoint
		case "--s3-bucket":
			a = "--s3-bucket=" + s3.Bucket
		case "--discovery-listen", "--relay-listen":
			continue
		}
		shipped = append(shipped, a)
	}
	shipped = append(shipped, "--discovery-listen=127.0.0.1:0", "--relay-listen=127.0.0.1:0")

	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	pwFile := filepath.Join(dir, "console-password")
	const password = "the console password from a file"
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"LOCKSTEP_HOME="+home,
		"LOCKSTEP_S3_ACCESS_KEY="+s3.AccessKey,
		"LOCKSTEP_S3_SECRET_KEY="+s3.SecretKey,
	)

	health := func() error {
		cmd := exec.Command("sh", "-c", healthCmd(t))
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if health() == nil {
		t.Fatal("the health check passes with no node running")
	}

	// Without the password file the console cannot leave loopback, and
	// serve says how to set it.
	noPw := exec.Command("sh", append([]string{filepath.Join(repoRoot, "deploy", "entrypoint.sh")}, shipped...)...)
	noPw.Env = env
	if out, err := noPw.CombinedOutput(); err == nil || !strings.Contains(string(out), "console password") {
		t.Fatalf("the receiver without a console password: %v\n%s", err, out)
	}
	// A password file the container's user cannot read is named.
	bad := exec.Command("sh", append([]string{filepath.Join(repoRoot, "deploy", "entrypoint.sh")}, shipped...)...)
	bad.Env = append(slices.Clone(env), "LOCKSTEP_CONSOLE_PASSWORD_FILE="+filepath.Join(dir, "missing"))
	if out, err := bad.CombinedOutput(); bad.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "LOCKSTEP_CONSOLE_PASSWORD_FILE="+filepath.Join(dir, "missing")) {
		t.Fatalf("a missing password file: %v, want exit 2 naming it\n%s", err, out)
	}

	log := &testutil.LockedBuffer{}
	cmd := exec.Command("sh", append([]string{filepath.Join(repoRoot, "deploy", "entrypoint.sh")}, shipped...)...)
	cmd.Env = append(slices.Clone(env), "LOCKSTEP_CONSOLE_PASSWORD_FILE="+pwFile)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so that a failed test also stops the node
	// the script started before it execs the real one.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil && !t.Failed() {
				t.Errorf("the receiver did not exit cleanly on SIGTERM: %v\n%s", err, log.String())
			}
		case <-time.After(30 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			t.Errorf("the receiver did not stop within 30 s of SIGTERM\n%s", log.String())
		}
		if t.Failed() {
			t.Logf("log of the receiver:\n%s", log.String())
		}
	})

	// The node that finally runs is the script's own process (exec), as
	// the container's main process must be to get its signals.
	var gui string
	testutil.Eventually(t, time.Minute, "the receiver to be ready", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("the entrypoint exited: %v\n%s", err, log.String())
		default:
		}
		info := readServeJSON(home)
		if info.PID != cmd.Process.Pid {
			return false
		}
		gui = info.GUI
		return true
	})
	if !strings.HasPrefix(gui, "https://127.0.0.1:") {
		t.Fatalf("the console is at %s, want HTTPS", gui)
	}
	if err := health(); err != nil {
		t.Fatalf("the image's health check fails on a ready receiver: %v", err)
	}
	st := mustRun(t, home, "status", "--json")
	if !strings.Contains(st, "s3:http://"+s3.Endpoint+"/"+s3.Bucket) {
		t.Errorf("the receiver does not keep its blobs in the test bucket: %s", st)
	}

	// The password is the file's: the console's login takes it and
	// refuses another.
	certPEM, err := os.ReadFile(filepath.Join(home, "gui-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	jar, _ := cookiejar.New(nil)
	cl := &consoleClient{t: t, base: gui, http: &http.Client{Jar: jar,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if code, _, _ := cl.do("POST", "/login", "", url.Values{"csrf": {cl.form("/login")}, "password": {"not the password"}}); code != http.StatusUnauthorized {
		t.Errorf("login with another password: %d, want 401", code)
	}
	if code, loc, _ := cl.do("POST", "/login", "", url.Values{"csrf": {cl.form("/login")}, "password": {password}}); code != http.StatusSeeOther || loc != "/" {
		t.Errorf("login with the file's password: %d to %q, want 303 to /", code, loc)
	}
}

// serveInfo is the part of serve.json the deployment tests read.
type serveInfo struct {
	GUI string `json:"gui"`
	PID int    `json:"pid"`
}

// readServeJSON reads a home's serve.json; zero while there is none.
func readServeJSON(home string) serveInfo {
	var info serveInfo
	if b, err := os.ReadFile(filepath.Join(home, "serve.json")); err == nil {
		json.Unmarshal(b, &info)
	}
	return info
}
