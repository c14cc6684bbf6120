package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder/translog"
)

// cmdVerifyExport verifies a log export (ladder audit export --format log)
// offline: no database, no server, only the file and the checkpoint public
// key. It exits 1 naming the first thing that does not verify.
func cmdVerifyExport(e env, args []string) error {
	fset := flag.NewFlagSet("audit verify-export", flag.ContinueOnError)
	fset.SetOutput(e.stderr)
	key := fset.String("key", "", "the server's checkpoint public key (GET /.well-known/ladder-checkpoint-key; `ladder keys checkpoint-key` printed it)")
	if err := parseFlags(e, fset, args); err != nil {
		return err
	}
	if fset.NArg() != 1 || *key == "" {
		return exitError{code: 3, msg: "usage: ladder audit verify-export --key PUBKEY FILE"}
	}
	f, err := os.Open(fset.Arg(0))
	if err != nil {
		return exitError{code: 3, msg: fmt.Sprintf("ladder audit verify-export: %v", err)}
	}
	defer f.Close()
	res, err := translog.VerifyBundle(f, *key)
	if err != nil {
		return exitError{code: 1, msg: fmt.Sprintf("audit export DOES NOT VERIFY: %v", err)}
	}
	fmt.Fprintf(e.stdout, "audit export verified: %d records of workspace %s, every hash matches its record and the records hash to root %s, signed by %s at size %d (%s)\n",
		res.Records, res.Workspace, res.Checkpoint.Tree.Hash, strings.TrimSuffix(res.Checkpoint.Origin, "/audit/"+res.Workspace), res.Checkpoint.Tree.N, res.Checkpoint.At.Format("2006-01-02T15:04:05Z07:00"))
	return nil
}

// cmdWitness fetches the latest checkpoint of the key's workspace's log,
// checks its signature and that it extends the checkpoint this witness
// stored last (with a consistency proof from the server), and stores it.
// A history that does not extend the stored one is a fork: it exits 1,
// keeps the stored checkpoint and saves the conflicting one beside it.
func cmdWitness(ctx context.Context, e env, args []string) error {
	fset := flag.NewFlagSet("audit witness", flag.ContinueOnError)
	fset.SetOutput(e.stderr)
	remote := addRemoteFlags(fset, e)
	pub := fset.String("pubkey", "", "the server's checkpoint public key, obtained out of band (not from the server being witnessed)")
	state := fset.String("state", "", "directory where the witness keeps the last checkpoint it verified of each log")
	if err := parseFlags(e, fset, args); err != nil {
		return err
	}
	if *pub == "" || *state == "" || fset.NArg() > 0 {
		return exitError{code: 3, msg: "usage: ladder audit witness --server URL --key HUMAN_KEY --pubkey PUBKEY --state DIR"}
	}
	c, err := remote.client()
	if err != nil {
		return err
	}
	view, err := c.AuditCheckpoint(ctx)
	if err != nil {
		return refusal(err)
	}
	cur, err := translog.Open(view.Note, *pub)
	if err != nil {
		return exitError{code: 1, msg: fmt.Sprintf("witness: the server's checkpoint does not verify: %v", err)}
	}
	if err := os.MkdirAll(*state, 0o700); err != nil {
		return fmt.Errorf("witness state: %w", err)
	}
	file := filepath.Join(*state, safeName(cur.Origin)+".checkpoint")
	stored, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := writeFileAtomic(file, []byte(view.Note)); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "witness: first checkpoint of %s: %d records, root %s; stored in %s\n", cur.Origin, cur.Tree.N, cur.Tree.Hash, file)
		return nil
	case err != nil:
		return fmt.Errorf("witness state: %w", err)
	}
	old, err := translog.Open(string(stored), *pub)
	if err != nil {
		return exitError{code: 1, msg: fmt.Sprintf("witness: the stored checkpoint %s does not verify with --pubkey: %v", file, err)}
	}
	var proof tlog.TreeProof
	if cur.Tree.N > old.Tree.N {
		cons, err := c.AuditConsistency(ctx, old.Tree.N, cur.Tree.N)
		if err != nil {
			return refusal(err)
		}
		for _, s := range cons.Proof {
			h, err := tlog.ParseHash(s)
			if err != nil {
				return exitError{code: 1, msg: fmt.Sprintf("witness: the server's consistency proof holds a malformed hash %q", s)}
			}
			proof = append(proof, h)
		}
	}
	if err := translog.CheckExtends(old, cur, proof); err != nil {
		fork := strings.TrimSuffix(file, ".checkpoint") + ".fork"
		if werr := writeFileAtomic(fork, []byte(view.Note)); werr != nil {
			return werr
		}
		return exitError{code: 1, msg: fmt.Sprintf("witness: %v. The checkpoint seen before stays in %s; the server's conflicting signed checkpoint is saved in %s as evidence.", err, file, fork)}
	}
	if err := writeFileAtomic(file, []byte(view.Note)); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "witness: %s at %d records (root %s) extends the checkpoint seen before at %d records; stored\n", cur.Origin, cur.Tree.N, cur.Tree.Hash, old.Tree.N)
	return nil
}

// safeName keeps the letters, digits and -_. of name, so an origin line
// makes one file name.
func safeName(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, name)
}

// writeFileAtomic replaces path with data, never leaving it half written.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("witness state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("witness state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("witness state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("witness state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("witness state: %w", err)
	}
	return nil
}
