package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/demo"
	lhttp "github.com/ladderhq/ladder/http"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/translog"
)

// demoKeys is the keys file `ladder demo` writes.
type demoKeys struct {
	Admin      string                       `json:"admin"`
	Workspaces map[string]map[string]string `json:"workspaces"`
}

func cmdDemo(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	addr := fs.String("addr", envOr(e, "LADDER_ADDR", "127.0.0.1:8080"), "address to listen on, loopback unless you say otherwise (or LADDER_ADDR)")
	db := fs.String("db", "", "database path (default: a fresh file in a temporary folder)")
	keysFile := fs.String("keys", "ladder-demo-keys.json", "where to write the demo keys as JSON")
	gatewayFile := fs.String("gateway", "ladder-demo-gateway.yaml", "where to write a ready gateway file (for ladder ask and ladder gateway)")
	envFile := fs.String("env-file", "ladder-demo.env", "where to write the server URL and the keys as shell variables (source it: . ./ladder-demo.env)")
	printConfig := fs.Bool("print-config", false, "write the embedded demo config to stdout and exit")
	toolNames := fs.String("tool-names", "canonical", "MCP tool names: canonical (ticket6:readLedger) or portable (ticket6_readLedger)")
	upstreamURL := fs.String("upstream", "", "call the stand-in systems (TMS, rates, payments, partner ledger) at this URL instead of serving them in this process; bench/standin serves them on their own, so a benchmark sees ladder's upstream in another process, as a deployment has it")
	openWS := fs.String("insecure-open-mcp-workspace", "", "TESTING ONLY: serve this workspace's MCP tools without a key to loopback clients (for the MCP conformance suite)")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if *printConfig {
		_, err := e.stdout.Write(printedDemoConfig())
		return err
	}
	if *upstreamURL != "" {
		if err := checkUpstream(*upstreamURL); err != nil {
			return err
		}
	}
	logs := newServerLogs(e.stderr)
	defer logs.flush()
	log := logs.log
	cfg, err := config.Parse("demo.yaml", config.Demo())
	if err != nil {
		return fmt.Errorf("demo config: %w", err)
	}
	// Bind first: a second demo on a busy port fails at once, naming the
	// address, before it seeds or writes anything.
	ln, err := listen(*addr)
	if err != nil {
		return err
	}
	defer ln.Close() // serveStack closes it too; a second Close is harmless
	path := *db
	temporary := path == ""
	if temporary {
		dir, err := os.MkdirTemp("", "ladder-demo-")
		if err != nil {
			return fmt.Errorf("make temporary folder: %w", err)
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "ladder.db")
	}
	// The demo signs its audit checkpoints with a key of its own unless
	// the environment holds one (server.checkpoint_key_env); the banner
	// prints the public half.
	getenv, keyEnv := e.getenv, cfg.Server.CheckpointKeyEnv
	if getenv(keyEnv) == "" {
		skey, _, err := translog.GenerateKey("ladder-demo")
		if err != nil {
			return err
		}
		getenv = func(k string) string {
			if k == keyEnv {
				return skey
			}
			return e.getenv(k)
		}
	}
	st, err := openStackWith(ctx, cfg, path, getenv, log, stackOptions{noSteps: true, traces: true})
	if err != nil {
		return err
	}
	defer st.Close()
	up, where := demo.RemoteUpstream(*upstreamURL), "demo upstream in another process"
	if *upstreamURL == "" {
		if up, err = demo.StartUpstream(); err != nil {
			return err
		}
		where = "demo upstream listening"
	}
	defer up.Close()
	st.pool.Rewrite = up.Resolve
	// The stand-in systems' address, for calling them directly (the
	// capability benchmark compares a call through ladder with one made
	// straight to the stand-in ledger at URL/ledger/mcp).
	log.Info(where, "url", up.URL)

	start := time.Now()
	fmt.Fprintf(e.stdout, "Seeding %d weeks of history…\n", demo.Weeks)
	err = demo.Seed(ctx, st.svc, time.Now(), func(done, total int, step string) {
		fmt.Fprintf(e.stdout, "  [%2d/%d] %s\n", done, total, step)
	})
	if err != nil {
		return err
	}
	work, err := demo.SeedWork(ctx, st.svc)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Seeded in %s: %d approvals, %d shadow proposals and %d sampled audits wait in the console; %d gate decisions are in its gate history.\n\n",
		time.Since(start).Round(time.Millisecond), work.Approvals, work.Shadows, work.Audits, work.Gate)

	// Seeding is a one-time transient: its rows, JSONL and replays peak
	// the Go heap at about 80 MB (146 MB resident), all garbage once it is
	// done (the live heap is 4 MB after), and the runtime's background
	// scavenger hands the freed pages back to the kernel only gradually.
	// Give them back now, so the server starts at its own size (50–56 MB
	// resident instead of 106–108, BENCHMARKS.md issue 22).
	debug.FreeOSMemory()
	keys, err := makeDemoKeys(ctx, st.svc)
	if err != nil {
		return err
	}
	// One agent key may have as many requests in progress as the whole
	// server, as its rate limit is generous: bench/run.sh drives one key
	// with 64 clients.
	return serveStack(ctx, st, serveOptions{addr: *addr, listener: ln, demo: true, accessLog: logs.access, toolNames: *toolNames, openWorkspace: *openWS, maxPerKey: lhttp.DefaultMaxInFlight, ready: func(url string) error {
		// The files are written only now that this demo holds its port,
		// so they never name keys of a demo that is not running.
		data, _ := json.MarshalIndent(keys, "", "  ")
		if err := os.WriteFile(*keysFile, append(data, '\n'), 0o600); err != nil {
			return fmt.Errorf("write keys file: %w", err)
		}
		if err := os.WriteFile(*envFile, demoEnv(url, keys), 0o600); err != nil {
			return fmt.Errorf("write env file: %w", err)
		}
		gwErr := writeDemoGateway(*gatewayFile, url, cfg, keys)
		if gwErr != nil {
			fmt.Fprintln(e.stderr, "ladder demo:", gwErr)
		}
		printDemoBanner(e, demoBanner{url: url, db: path, temporary: temporary, keysFile: *keysFile, envFile: *envFile, gatewayFile: *gatewayFile, gatewayWritten: gwErr == nil, checkpointKey: st.svc.CheckpointKey()}, keys)
		return nil
	}})
}

// demoEnv is the env file: the server's URL and every demo key as shell
// variables, so a second terminal gets them with one `. ./ladder-demo.env`
// and no JSON tool. LADDER_SERVER and LADDER_KEY (the vantrow-bills agent
// key) are the ones every CLI command reads; each key also has its own
// LADDER_DEMO_<WORKSPACE>_<KIND> name.
func demoEnv(url string, keys demoKeys) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# ladder demo at %s: source this file in a shell (. ./ladder-demo.env).\n", url)
	fmt.Fprintf(&b, "export LADDER_SERVER=%s\n", shellQuote(url))
	fmt.Fprintf(&b, "export LADDER_KEY=%s\n", shellQuote(keys.Workspaces["vantrow-bills"]["agent"]))
	fmt.Fprintf(&b, "export LADDER_DEMO_ADMIN=%s\n", shellQuote(keys.Admin))
	wss := make([]string, 0, len(keys.Workspaces))
	for ws := range keys.Workspaces {
		wss = append(wss, ws)
	}
	sort.Strings(wss)
	for _, ws := range wss {
		for _, kind := range []string{"agent", "human"} {
			name := "LADDER_DEMO_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(ws)) + "_" + strings.ToUpper(kind)
			fmt.Fprintf(&b, "export %s=%s\n", name, shellQuote(keys.Workspaces[ws][kind]))
		}
	}
	return []byte(b.String())
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// makeDemoKeys creates one all-workspaces admin key and an agent and a
// human key per workspace.
func makeDemoKeys(ctx context.Context, svc *service.Service) (demoKeys, error) {
	keys := demoKeys{Workspaces: map[string]map[string]string{}}
	_, tok, err := svc.CreateKey(ctx, "demo", ladder.KeyRequest{Workspace: service.AllWorkspaces, Kind: ladder.KeyAdmin, Name: "demo admin"})
	if err != nil {
		return keys, err
	}
	keys.Admin = tok
	for _, ws := range svc.WorkspaceIDs() {
		keys.Workspaces[ws] = map[string]string{}
		for _, kind := range []ladder.KeyKind{ladder.KeyAgent, ladder.KeyHuman} {
			_, tok, err := svc.CreateKey(ctx, "demo", ladder.KeyRequest{Workspace: ws, Kind: kind, Name: "demo " + string(kind)})
			if err != nil {
				return keys, err
			}
			keys.Workspaces[ws][string(kind)] = tok
		}
	}
	return keys, nil
}

// demoBanner is what the demo's banner tells besides the keys.
type demoBanner struct {
	url, db     string
	temporary   bool // db is in a temporary folder removed on exit
	keysFile    string
	envFile     string
	gatewayFile string
	// gatewayWritten is false when the gateway file could not be written.
	gatewayWritten bool
	checkpointKey  string // the public half of the audit checkpoint key
}

func printDemoBanner(e env, b demoBanner, keys demoKeys) {
	agent := keys.Workspaces["vantrow-bills"]["agent"]
	human := keys.Workspaces["vantrow-bills"]["human"]
	w := e.stdout
	fmt.Fprintf(w, "ladder demo is running at %s\n\n", b.url)
	fmt.Fprintf(w, "Console:  %s/console/ — sign in with a human key (vantrow-bills: %s)\n", b.url, human)
	db := b.db
	if b.temporary {
		db += " (temporary, removed when the demo stops; keep one with --db)"
	}
	fmt.Fprintf(w, "Database: %s\n", db)
	fmt.Fprintf(w, "Audit:    checkpoints signed by %s (also at %s/.well-known/ladder-checkpoint-key)\n", b.checkpointKey, b.url)
	fmt.Fprintf(w, "Keys:     %s, and as shell variables in %s (in another terminal: . ./%s)\n", b.keysFile, b.envFile, filepath.Base(b.envFile))
	if b.gatewayWritten {
		fmt.Fprintf(w, "Gateway:  %s (try: ladder ask \"Check the fuel surcharge\" --gateway %s)\n", b.gatewayFile, b.gatewayFile)
	}
	fmt.Fprintf(w, "\nKeys (agent keys for agents and MCP, human keys for the console and approvals):\n  admin (every workspace): %s\n", keys.Admin)
	wss := make([]string, 0, len(keys.Workspaces))
	for ws := range keys.Workspaces {
		wss = append(wss, ws)
	}
	sort.Strings(wss)
	for _, ws := range wss {
		k := keys.Workspaces[ws]
		fmt.Fprintf(w, "  %-17s agent %s\n  %-17s human %s\n", ws, k["agent"], "", k["human"])
	}
	fmt.Fprintf(w, `
Try it:
  curl -s -H 'Authorization: Bearer %[2]s' %[1]s/v1/steps
  curl -s -H 'Authorization: Bearer %[2]s' %[1]s/v1/steps/bills/decide_hold/evidence

MCP client configuration (vantrow-bills agent):
  {"mcpServers": {"ladder": {"type": "http", "url": "%[1]s/mcp",
    "headers": {"Authorization": "Bearer %[2]s"}}}}

Press Ctrl-C to stop.
`, b.url, agent)
}

// printedDemoConfig is the demo config as --print-config writes it: the
// embedded file's schema comment names ladder.schema.json beside it in
// config/, but the printed copy lands wherever it is redirected (the README
// writes ./ladder.yaml at the repository root), so it names the schema from
// there.
func printedDemoConfig() []byte {
	return bytes.Replace(config.Demo(),
		[]byte("# yaml-language-server: $schema="+config.SchemaFile+"\n"),
		[]byte("# yaml-language-server: $schema=config/"+config.SchemaFile+"\n"+
			"# (the schema's path from the repository root; elsewhere, point it at your\n"+
			"# copy of config/"+config.SchemaFile+")\n"), 1)
}

// checkUpstream refuses a --upstream that is not an http URL or where
// nothing answers, before the demo seeds: seeding calls the stand-ins, and
// a typo should fail in a second, naming the URL, not halfway through.
func checkUpstream(raw string) error {
	u, ok := httpURL(raw)
	if !ok || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("--upstream %q: want the stand-ins' base URL, such as http://127.0.0.1:18954 (bench/standin prints it)", raw)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	c, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err != nil {
		return fmt.Errorf("--upstream %s: nothing answers there (%v); start the stand-ins first: go run ./bench/standin -addr %s", raw, err, host)
	}
	return c.Close()
}
