package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/postgres"
	"github.com/ladderhq/ladder/translog"
)

// routeItems routes n items of workspace vantrow-bills through e.
func routeItems(t *testing.T, e *testenv.Env, prefix string, n int) {
	t.Helper()
	for i := range n {
		res := e.Do("POST", "/v1/route", e.Keys["vantrow-bills/agent"], map[string]any{"queue": "bills", "step": "post_tms", "item": fmt.Sprintf("%s-%d", prefix, i)})
		if res.Status != http.StatusOK {
			t.Fatalf("route: %d %s", res.Status, res.Raw)
		}
	}
}

// exportLog runs ladder audit export --format log against e as the
// vantrow-bills human and returns the file it wrote.
func exportLog(t *testing.T, e *testenv.Env) string {
	t.Helper()
	out, _, err := runCLI(t, map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["vantrow-bills/human"]}, "audit", "export", "--format", "log")
	if err != nil {
		t.Fatalf("export --format log: %v", err)
	}
	file := filepath.Join(t.TempDir(), "log.jsonl")
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// verifyExport runs ladder audit verify-export on file with key.
func verifyExport(t *testing.T, file, key string) (string, error) {
	t.Helper()
	out, _, err := runCLI(t, nil, "audit", "verify-export", "--key", key, file)
	return out, err
}

// TestAuditLogExportVerifiesOffline exports a workspace's log from a
// server on SQLite and verifies it with nothing but the file and the
// public key; then each kind of tampering is caught, naming what and
// where.
func TestAuditLogExportVerifiesOffline(t *testing.T) {
	e, _ := auditServer(t)
	file := exportLog(t, e)
	out, err := verifyExport(t, file, e.CheckpointKey)
	if err != nil || !strings.Contains(out, "audit export verified") || !strings.Contains(out, "workspace vantrow-bills") {
		t.Fatalf("verify-export of an untouched export: %v\n%s", err, out)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 8 {
		t.Fatalf("export has %d lines", len(lines))
	}
	leafAt := func(i int) translog.BundleLeaf {
		var l translog.BundleLeaf
		if err := json.Unmarshal([]byte(lines[i]), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	line := func(l translog.BundleLeaf) string {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	with := func(i int, s string) []string {
		c := append([]string(nil), lines...)
		c[i] = s
		return c
	}
	// Line 0 is the header; line k+1 is leaf k.
	l4, l5 := leafAt(5), leafAt(6)
	altered := l4
	altered.Record.Subject = "rewritten"
	sealed := altered
	sealed.Record.Seal(sealed.Record.PrevHash)
	sealed.LeafHash = translog.LeafHash(sealed.Record)
	_, otherKey, err := translog.GenerateKey("ladder.test")
	if err != nil {
		t.Fatal(err)
	}
	// A reordered pair: leaves 4 and 5 swapped line for line, and swapped
	// with their leaf numbers kept in place.
	swapped := append([]string(nil), lines...)
	swapped[5], swapped[6] = lines[6], lines[5]
	a, b := l4, l5
	a.Leaf, b.Leaf = l5.Leaf, l4.Leaf
	renumbered := with(5, line(b))
	renumbered[6] = line(a)
	chainOnly := sealed
	chainOnly.LeafHash = l4.LeafHash
	tests := []struct {
		name  string
		lines []string
		key   string
		want  []string
	}{
		{"a tampered record", with(5, line(altered)), e.CheckpointKey,
			[]string{fmt.Sprintf("record %d (leaf 4)", l4.Record.Seq), "hash does not match its contents", "altered"}},
		{"a tampered record with its chain hash recomputed", with(5, line(chainOnly)), e.CheckpointKey,
			[]string{fmt.Sprintf("record %d (leaf 4)", l4.Record.Seq), "leaf hash the log holds", "altered"}},
		{"a tampered record with every hash recomputed", with(5, line(sealed)), e.CheckpointKey,
			[]string{"records hash to root", "not the checkpoint's signed root"}},
		{"a deleted record", append(append([]string(nil), lines[:5]...), lines[6:]...), e.CheckpointKey,
			[]string{"leaf 4 is missing", fmt.Sprintf("leaf 5 (record %d)", l5.Record.Seq), "deleted"}},
		{"a deleted last record", lines[:len(lines)-1], e.CheckpointKey,
			[]string{"records were deleted"}},
		{"a reordered pair", swapped, e.CheckpointKey,
			[]string{fmt.Sprintf("record %d (leaf 5)", l5.Record.Seq), "out of place", "reordered"}},
		{"a reordered pair renumbered", renumbered, e.CheckpointKey,
			[]string{fmt.Sprintf("record %d (leaf 5)", l4.Record.Seq), fmt.Sprintf("follows record %d at leaf 4", l5.Record.Seq), "out of order"}},
		{"a checkpoint signed by another key", lines, otherKey,
			[]string{"checkpoint is not signed by key ladder.test", "another key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad.jsonl")
			if err := os.WriteFile(bad, []byte(strings.Join(tt.lines, "")), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := verifyExport(t, bad, tt.key)
			if exitCode(err) != 1 {
				t.Fatalf("exit %d (%v), want 1", exitCode(err), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestAuditLogProofs asks the server for a checkpoint, a record's proof
// and a consistency proof over REST and checks each against the signed
// note, as a client would; and refuses bad input.
func TestAuditLogProofs(t *testing.T) {
	e, _ := auditServer(t)
	human := e.Keys["vantrow-bills/human"]
	checkpoint := func() (ladder.AuditCheckpoint, translog.Checkpoint) {
		t.Helper()
		res := e.Do("GET", "/v1/audit/checkpoint", human, nil)
		if res.Status != http.StatusOK {
			t.Fatalf("checkpoint: %d %s", res.Status, res.Raw)
		}
		var cp ladder.AuditCheckpoint
		if err := json.Unmarshal(res.Raw, &cp); err != nil {
			t.Fatal(err)
		}
		c, err := translog.Open(cp.Note, e.CheckpointKey)
		if err != nil {
			t.Fatalf("open checkpoint: %v", err)
		}
		if c.Tree.N != cp.Size || c.Tree.Hash.String() != cp.Root || c.Origin != "ladder.test/audit/vantrow-bills" {
			t.Fatalf("checkpoint view %+v does not match its note %+v", cp, c)
		}
		return cp, c
	}
	_, old := checkpoint()

	recs, err := e.Store.ListAudit(context.Background(), ladder.AuditQuery{Workspace: "vantrow-bills", Kind: ladder.AuditRoute, Limit: 1})
	if err != nil || len(recs) != 1 {
		t.Fatalf("a route record: %v", err)
	}
	res := e.Do("GET", fmt.Sprintf("/v1/audit/records/%d/proof", recs[0].Seq), human, nil)
	if res.Status != http.StatusOK {
		t.Fatalf("proof: %d %s", res.Status, res.Raw)
	}
	var p ladder.AuditProof
	if err := json.Unmarshal(res.Raw, &p); err != nil {
		t.Fatal(err)
	}
	pc, err := translog.Open(p.Checkpoint.Note, e.CheckpointKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckRecord(parseHashes(t, p.Proof), pc.Tree.N, pc.Tree.Hash, p.Leaf, translog.LeafHash(p.Record)); err != nil {
		t.Fatalf("inclusion proof of record %d does not check: %v", recs[0].Seq, err)
	}
	forged := p.Record
	forged.Subject = "forged"
	if err := tlog.CheckRecord(parseHashes(t, p.Proof), pc.Tree.N, pc.Tree.Hash, p.Leaf, translog.LeafHash(forged)); err == nil {
		t.Fatal("the proof checks an altered record")
	}

	routeItems(t, e, "MORE", 5)
	_, cur := checkpoint()
	if cur.Tree.N <= old.Tree.N {
		t.Fatalf("tree did not grow: %d → %d", old.Tree.N, cur.Tree.N)
	}
	res = e.Do("GET", fmt.Sprintf("/v1/audit/consistency?from=%d&to=%d", old.Tree.N, cur.Tree.N), human, nil)
	if res.Status != http.StatusOK {
		t.Fatalf("consistency: %d %s", res.Status, res.Raw)
	}
	var c ladder.AuditConsistency
	if err := json.Unmarshal(res.Raw, &c); err != nil {
		t.Fatal(err)
	}
	if err := translog.CheckExtends(old, cur, parseHashes(t, c.Proof)); err != nil {
		t.Fatalf("consistency proof: %v", err)
	}

	other := e.Do("GET", "/v1/audit", e.Keys["checkcall-loads/human"], nil)
	var page ladder.AuditPage
	if err := json.Unmarshal(other.Raw, &page); err != nil || len(page.Records) == 0 {
		t.Fatalf("checkcall-loads records: %v %s", err, other.Raw)
	}
	bad := []struct {
		path   string
		status int
		code   ladder.Code
		say    string
	}{
		{fmt.Sprintf("/v1/audit/consistency?from=%d&to=%d", cur.Tree.N, old.Tree.N), 400, ladder.CodeInvalidArgument, "is larger than"},
		{fmt.Sprintf("/v1/audit/consistency?from=1&to=%d", cur.Tree.N+1000), 400, ladder.CodeInvalidArgument, "beyond the log's latest checkpoint"},
		{"/v1/audit/consistency?from=0&to=1", 400, ladder.CodeInvalidArgument, "below 1"},
		{"/v1/audit/consistency?from=x&to=1", 400, ladder.CodeInvalidArgument, "not a whole number"},
		{"/v1/audit/records/99999999/proof", 404, ladder.CodeNotFound, "has no record 99999999"},
		{fmt.Sprintf("/v1/audit/records/%d/proof", page.Records[0].Seq), 404, ladder.CodeNotFound, fmt.Sprintf("has no record %d", page.Records[0].Seq)},
		{"/v1/audit/records/abc/proof", 400, ladder.CodeInvalidArgument, "not a positive whole number"},
	}
	for _, b := range bad {
		res := e.Do("GET", b.path, human, nil)
		if res.Status != b.status || !strings.Contains(string(res.Raw), string(b.code)) || !strings.Contains(string(res.Raw), b.say) {
			t.Errorf("GET %s: %d %s, want %d %s saying %q", b.path, res.Status, res.Raw, b.status, b.code, b.say)
		}
	}
	if res := e.Do("GET", "/v1/audit/checkpoint", e.Keys["vantrow-bills/agent"], nil); res.Status != http.StatusForbidden {
		t.Errorf("an agent key reads the checkpoint: %d %s", res.Status, res.Raw)
	}
	res = e.Do("GET", "/.well-known/ladder-checkpoint-key", "", nil)
	if res.Status != http.StatusOK || strings.TrimSpace(string(res.Raw)) != e.CheckpointKey {
		t.Errorf("well-known key: %d %q, want %q", res.Status, res.Raw, e.CheckpointKey)
	}
}

func parseHashes(t *testing.T, ss []string) []tlog.Hash {
	t.Helper()
	out := make([]tlog.Hash, len(ss))
	for i, s := range ss {
		h, err := tlog.ParseHash(s)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = h
	}
	return out
}

// TestWitnessCatchesForkedHistory runs ladder audit witness as another
// machine would: it stores the first checkpoint, accepts one that extends
// it, and after the database is rewritten (a record changed, the tree
// rebuilt and re-signed with the server's own key) exits 1 saying the
// history forked, keeping what it saw and the conflicting checkpoint.
func TestWitnessCatchesForkedHistory(t *testing.T) {
	e, db := auditServer(t)
	state := t.TempDir()
	witness := func() (string, error) {
		out, _, err := runCLI(t, nil, "audit", "witness", "--server", e.Server.URL, "--key", e.Keys["vantrow-bills/human"], "--pubkey", e.CheckpointKey, "--state", state)
		return out, err
	}
	if out, err := witness(); err != nil || !strings.Contains(out, "first checkpoint of ladder.test/audit/vantrow-bills") {
		t.Fatalf("first witness run: %v %s", err, out)
	}
	routeItems(t, e, "W", 3)
	if out, err := witness(); err != nil || !strings.Contains(out, "extends the checkpoint seen before") {
		t.Fatalf("second witness run: %v %s", err, out)
	}
	if out, err := witness(); err != nil || !strings.Contains(out, "extends") {
		t.Fatalf("witness run with no new records: %v %s", err, out)
	}
	stored, err := os.ReadFile(filepath.Join(state, "ladder.test_audit_vantrow-bills.checkpoint"))
	if err != nil {
		t.Fatal(err)
	}

	// Whoever can write the database rewrites a record and rebuilds the
	// workspace's tree; the server signs the rewritten history.
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		`DROP TRIGGER audit_no_update`,
		`UPDATE audit SET subject = 'rewritten' WHERE seq = (SELECT MIN(seq) FROM audit WHERE workspace = 'vantrow-bills' AND kind = 'route')`,
		`DELETE FROM tlog_hash WHERE workspace = 'vantrow-bills'`,
		`DELETE FROM tlog_head WHERE workspace = 'vantrow-bills'`,
		`DELETE FROM tlog_checkpoint WHERE workspace = 'vantrow-bills'`,
	} {
		if _, err := conn.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, grow := range []bool{false, true} {
		if grow {
			// And with the tree grown past the size the witness saw.
			routeItems(t, e, "AFTER", 2)
		}
		_, err = witness()
		if exitCode(err) != 1 || !strings.Contains(err.Error(), "FORKED HISTORY") || !strings.Contains(err.Error(), "rewritten") {
			t.Fatalf("witness after the rewrite (grown %v): %v", grow, err)
		}
		after, rerr := os.ReadFile(filepath.Join(state, "ladder.test_audit_vantrow-bills.checkpoint"))
		if rerr != nil || string(after) != string(stored) {
			t.Fatalf("the witness replaced the checkpoint it saw: %v", rerr)
		}
		if _, ferr := os.Stat(filepath.Join(state, "ladder.test_audit_vantrow-bills.fork")); ferr != nil {
			t.Fatalf("no evidence saved: %v", ferr)
		}
	}
	if _, _, err := runCLI(t, nil, "audit", "witness", "--server", e.Server.URL, "--key", e.Keys["vantrow-bills/human"], "--pubkey", func() string {
		_, k, _ := translog.GenerateKey("ladder.test")
		return k
	}(), "--state", t.TempDir()); exitCode(err) != 1 || !strings.Contains(err.Error(), "another key") {
		t.Fatalf("witness with another public key: %v", err)
	}
}

// TestCheckpointKeyStartup: ladder keys checkpoint-key makes a pair the
// server takes, and serve refuses to start without a key (unless
// --unsigned-audit) or with a malformed one.
func TestCheckpointKeyStartup(t *testing.T) {
	out, _, err := runCLI(t, nil, "keys", "checkpoint-key", "--name", "ladder.example.com", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var pair struct{ Private, Public string }
	if err := json.Unmarshal([]byte(out), &pair); err != nil || !strings.HasPrefix(pair.Private, "PRIVATE+KEY+ladder.example.com+") || !strings.HasPrefix(pair.Public, "ladder.example.com+") {
		t.Fatalf("checkpoint-key: %v %s", err, out)
	}
	s, err := translog.NewSigner(pair.Private)
	if err != nil || s.PublicKey() != pair.Public {
		t.Fatalf("the private half's public key %q is not the printed %q (%v)", s.PublicKey(), pair.Public, err)
	}
	cfg := writeDemoConfig(t)
	_, _, err = runCLI(t, nil, "serve", "--config", cfg, "--db", filepath.Join(t.TempDir(), "x.db"), "--addr", "127.0.0.1:0")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "LADDER_CHECKPOINT_KEY") || !strings.Contains(err.Error(), "--unsigned-audit") {
		t.Fatalf("serve without a key: %v", err)
	}
	_, _, err = runCLI(t, map[string]string{"LADDER_CHECKPOINT_KEY": pair.Public}, "serve", "--config", cfg, "--db", filepath.Join(t.TempDir(), "y.db"), "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "LADDER_CHECKPOINT_KEY") || !strings.Contains(err.Error(), "private half") {
		t.Fatalf("serve with the public half as its key: %v", err)
	}
	// server.checkpoint_key_env names another variable.
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(t.TempDir(), "named.yaml")
	if err := os.WriteFile(named, []byte(strings.Replace(string(data), "\nserver:\n", "\nserver:\n  checkpoint_key_env: MY_CHECKPOINT_KEY\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, map[string]string{"MY_CHECKPOINT_KEY": pair.Public}, "serve", "--config", named, "--db", filepath.Join(t.TempDir(), "z.db"), "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "MY_CHECKPOINT_KEY: checkpoint key") {
		t.Fatalf("serve with server.checkpoint_key_env naming a variable holding a public key: %v", err)
	}
	_, _, err = runCLI(t, map[string]string{"LADDER_CHECKPOINT_KEY": pair.Private}, "serve", "--config", named, "--db", filepath.Join(t.TempDir(), "w.db"), "--addr", "127.0.0.1:0")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "set MY_CHECKPOINT_KEY (server.checkpoint_key_env)") {
		t.Fatalf("serve with the key in the default variable but another one configured: %v", err)
	}
}

// TestAuditLogPostgresReplicas: two replicas on one PostgreSQL database,
// sharing one checkpoint key, write two workspaces at once and integrate
// at once; each workspace's export verifies offline from either replica,
// and both replicas sign the same tree.
func TestAuditLogPostgresReplicas(t *testing.T) {
	dsn := postgresDSN(t)
	schema := freshSchema(t, dsn)
	skey, vkey, err := translog.GenerateKey("ladder.test")
	if err != nil {
		t.Fatal(err)
	}
	var reps []*testenv.Env
	for range 2 {
		reps = append(reps, testenv.StartWith(t, "", testenv.Options{CheckpointKey: skey, Clock: testenv.WallClock(0),
			OpenStore: func(now func() time.Time) (ladder.Store, error) {
				return postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema, Now: now})
			}}))
	}
	var wg sync.WaitGroup
	for i, ws := range []string{"vantrow-bills", "checkcall-loads"} {
		for r, e := range reps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 10 {
					body := map[string]any{"queue": "bills", "step": "post_tms", "item": fmt.Sprintf("PG-%d-%d-%d", i, r, j)}
					if ws == "checkcall-loads" {
						body = map[string]any{"queue": "check_calls", "step": "capture_eta", "item": fmt.Sprintf("PG-%d-%d-%d", i, r, j)}
					}
					if res := e.Do("POST", "/v1/route", e.Keys[ws+"/agent"], body); res.Status != http.StatusOK {
						t.Errorf("route in %s: %d %s", ws, res.Status, res.Raw)
						return
					}
				}
				if err := e.Svc.IntegrateLogs(context.Background()); err != nil {
					t.Errorf("integrate: %v", err)
				}
			}()
		}
	}
	wg.Wait()
	for _, e := range reps {
		file := exportLog(t, e)
		if out, err := verifyExport(t, file, vkey); err != nil {
			t.Fatalf("verify-export of a PostgreSQL replica's export: %v", err)
		} else if !strings.Contains(out, "verified") {
			t.Fatalf("verify-export: %s", out)
		}
	}
	for _, ws := range []string{"vantrow-bills", "checkcall-loads"} {
		var roots []string
		for _, e := range reps {
			res := e.Do("GET", "/v1/audit/checkpoint", e.Keys[ws+"/human"], nil)
			var cp ladder.AuditCheckpoint
			if err := json.Unmarshal(res.Raw, &cp); err != nil || res.Status != http.StatusOK {
				t.Fatalf("checkpoint of %s: %d %s", ws, res.Status, res.Raw)
			}
			roots = append(roots, fmt.Sprintf("%d %s", cp.Size, cp.Root))
		}
		if roots[0] != roots[1] {
			t.Errorf("the replicas sign different trees of %s: %v", ws, roots)
		}
	}
}

// TestAuditLogAdoptsExistingChain: on a database whose records predate the
// logs, the first integration verifies the chain first; a broken chain is
// refused naming the record and nothing is integrated, and once it is
// whole its records become leaves and each workspace's log records that.
func TestAuditLogAdoptsExistingChain(t *testing.T) {
	e, db := auditServer(t)
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var subject string
	if err := conn.QueryRow(`SELECT subject FROM audit WHERE seq = 5`).Scan(&subject); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE tlog_meta SET adopted = 0, legacy_seq = (SELECT MAX(seq) FROM audit)`,
		`DROP TRIGGER audit_no_update`,
		`UPDATE audit SET subject = 'altered' WHERE seq = 5`,
	} {
		if _, err := conn.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	human := e.Keys["vantrow-bills/human"]
	res := e.Do("GET", "/v1/audit/checkpoint", human, nil)
	if res.Status != http.StatusServiceUnavailable || !strings.Contains(string(res.Raw), "AUDIT_UNAVAILABLE") || !strings.Contains(string(res.Raw), "broken at record 5") {
		t.Fatalf("checkpoint over a broken chain: %d %s", res.Status, res.Raw)
	}
	if n, _, err := e.Store.TlogHead(context.Background(), "vantrow-bills"); err != nil || n != 0 {
		t.Fatalf("a broken chain was integrated: %d leaves (%v)", n, err)
	}
	if _, err := conn.Exec(`UPDATE audit SET subject = ? WHERE seq = 5`, subject); err != nil {
		t.Fatal(err)
	}
	// The verdict stands for a minute, so asking again does not walk the
	// chain again.
	if res := e.Do("GET", "/v1/audit/checkpoint", human, nil); res.Status != http.StatusServiceUnavailable {
		t.Fatalf("checkpoint within a minute of the verdict: %d %s", res.Status, res.Raw)
	}
	e.Clock.Advance(2 * time.Minute)
	res = e.Do("GET", "/v1/audit/checkpoint", human, nil)
	if res.Status != http.StatusOK {
		t.Fatalf("checkpoint once the chain is whole: %d %s", res.Status, res.Raw)
	}
	starts, err := e.Store.ListAudit(context.Background(), ladder.AuditQuery{Workspace: "vantrow-bills", Kind: ladder.AuditTlogStart})
	if err != nil || len(starts) != 1 || !strings.Contains(string(starts[0].Data), `"chain_verified_records"`) {
		t.Fatalf("the log's start record: %v %+v", err, starts)
	}
	file := exportLog(t, e)
	if out, err := verifyExport(t, file, e.CheckpointKey); err != nil {
		t.Fatalf("export after adoption: %v %s", err, out)
	}
}

// TestUnsignedAuditSaysSo: a server without a checkpoint key says so in
// /readyz and refuses checkpoints and the key with a message naming why.
func TestUnsignedAuditSaysSo(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Unsigned: true})
	res := e.Do("GET", "/readyz", "", nil)
	if res.Status != http.StatusOK || !strings.Contains(string(res.Raw), `"audit_log":"UNSIGNED`) {
		t.Errorf("readyz of an unsigned server: %d %s", res.Status, res.Raw)
	}
	for _, path := range []string{"/v1/audit/checkpoint", "/.well-known/ladder-checkpoint-key", "/v1/audit/export?format=log"} {
		res := e.Do("GET", path, e.Keys["vantrow-bills/human"], nil)
		if res.Status != http.StatusNotFound || !strings.Contains(string(res.Raw), "--unsigned-audit") {
			t.Errorf("GET %s on an unsigned server: %d %s", path, res.Status, res.Raw)
		}
	}
	signed := testenv.StartWith(t, "", testenv.Options{})
	if res := signed.Do("GET", "/readyz", "", nil); strings.Contains(string(res.Raw), "UNSIGNED") {
		t.Errorf("readyz of a signed server: %s", res.Raw)
	}
}
