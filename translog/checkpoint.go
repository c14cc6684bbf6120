package translog

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// treeLine is the first line of tlog.FormatTree's form; a checkpoint puts
// its origin line there instead, as the C2SP checkpoint format does.
const treeLine = "go.sum database tree\n"

// timePrefix starts the checkpoint's extension line that says when it was
// signed.
const timePrefix = "time "

// Origin names the log of workspace on the server whose checkpoint key is
// named server: "SERVER/audit/WORKSPACE".
func Origin(server, workspace string) string { return server + "/audit/" + workspace }

// Checkpoint is a tree head of one workspace's log, as signed.
type Checkpoint struct {
	Origin string
	Tree   tlog.Tree
	At     time.Time
}

// Format returns c's note text:
//
//	SERVER/audit/WORKSPACE
//	SIZE
//	ROOT (base64)
//	time RFC3339
func (c Checkpoint) Format() string {
	tree := strings.TrimPrefix(string(tlog.FormatTree(c.Tree)), treeLine)
	return c.Origin + "\n" + tree + timePrefix + c.At.UTC().Format(time.RFC3339Nano) + "\n"
}

// ParseCheckpoint parses a checkpoint's note text (see Checkpoint.Format).
func ParseCheckpoint(text string) (Checkpoint, error) {
	origin, rest, ok := strings.Cut(text, "\n")
	if !ok || origin == "" {
		return Checkpoint{}, fmt.Errorf("checkpoint: no origin line")
	}
	tree, err := tlog.ParseTree([]byte(treeLine + rest))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	lines := strings.Split(rest, "\n")
	c := Checkpoint{Origin: origin, Tree: tree}
	if len(lines) > 2 && strings.HasPrefix(lines[2], timePrefix) {
		if c.At, err = time.Parse(time.RFC3339Nano, strings.TrimPrefix(lines[2], timePrefix)); err != nil {
			return Checkpoint{}, fmt.Errorf("checkpoint: bad time line: %w", err)
		}
	}
	return c, nil
}

// Signer signs checkpoints with the server's checkpoint key.
type Signer struct {
	signer note.Signer
	vkey   string
}

// GenerateKey returns a new checkpoint key pair named server, as signed
// note key strings: the private half (PRIVATE+KEY+…) and the public half.
func GenerateKey(server string) (skey, vkey string, err error) {
	return note.GenerateKey(rand.Reader, server)
}

// NewSigner returns the signer of the private key string skey.
func NewSigner(skey string) (*Signer, error) {
	s, err := note.NewSigner(strings.TrimSpace(skey))
	if err != nil {
		return nil, fmt.Errorf("checkpoint key: %w (want the private half `ladder keys checkpoint-key` prints, PRIVATE+KEY+NAME+…)", err)
	}
	vkey, err := publicKey(strings.TrimSpace(skey))
	if err != nil {
		return nil, err
	}
	return &Signer{signer: s, vkey: vkey}, nil
}

// publicKey derives the verifier key string of a private key string. The
// note package derives no public half from a private one, but both halves
// share name and hash and the Ed25519 seed gives the public key.
func publicKey(skey string) (string, error) {
	// PRIVATE+KEY+name+hash+base64(alg ‖ seed)
	parts := strings.SplitN(skey, "+", 5)
	if len(parts) != 5 {
		return "", fmt.Errorf("checkpoint key: malformed private key")
	}
	return verifierFromSeed(parts[2], parts[4])
}

// Name returns the key's name: the server's name in every origin line.
func (s *Signer) Name() string { return s.signer.Name() }

// PublicKey returns the verifier key string anyone checks checkpoints
// with.
func (s *Signer) PublicKey() string { return s.vkey }

// Sign returns the signed note of workspace's tree at time at.
func (s *Signer) Sign(workspace string, tree tlog.Tree, at time.Time) (string, error) {
	c := Checkpoint{Origin: Origin(s.Name(), workspace), Tree: tree, At: at}
	msg, err := note.Sign(&note.Note{Text: c.Format()}, s.signer)
	if err != nil {
		return "", fmt.Errorf("sign checkpoint: %w", err)
	}
	return string(msg), nil
}

// Open checks signed's signature with the verifier key vkey and returns
// the checkpoint it states. A note signed by another key, or altered after
// signing, is an error that says so.
func Open(signed, vkey string) (Checkpoint, error) {
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint public key: %w", err)
	}
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		switch err.(type) {
		case *note.UnverifiedNoteError:
			return Checkpoint{}, fmt.Errorf("checkpoint is not signed by key %s: it was signed by another key", v.Name())
		case *note.InvalidSignatureError:
			return Checkpoint{}, fmt.Errorf("checkpoint signature by key %s does not verify: the checkpoint was altered or signed by another key of that name", v.Name())
		}
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, err
	}
	if !strings.HasPrefix(c.Origin, v.Name()+"/audit/") {
		return Checkpoint{}, fmt.Errorf("checkpoint origin %q is not a log of server %s", c.Origin, v.Name())
	}
	return c, nil
}

// verifierFromSeed returns the verifier key string of key name whose
// private half encodes enc (base64 of the algorithm byte and the Ed25519
// seed).
func verifierFromSeed(name, enc string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 {
		return "", fmt.Errorf("checkpoint key: malformed private key")
	}
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	return note.NewEd25519VerifierKey(name, pub)
}

// CheckExtends checks that cur's tree extends old's: the same log, no
// smaller, and proof (a tree proof from old's size to cur's) ties the two
// roots. A checkpoint that fails is a forked or rolled-back history.
func CheckExtends(old, cur Checkpoint, proof tlog.TreeProof) error {
	switch {
	case cur.Origin != old.Origin:
		return fmt.Errorf("checkpoint origin %q is not the log %q the witness follows", cur.Origin, old.Origin)
	case cur.Tree.N < old.Tree.N:
		return fmt.Errorf("FORKED HISTORY: the log of %s has %d leaves, fewer than the %d of the checkpoint seen before: it was rolled back", old.Origin, cur.Tree.N, old.Tree.N)
	case cur.Tree.N == old.Tree.N:
		if cur.Tree.Hash != old.Tree.Hash {
			return fmt.Errorf("FORKED HISTORY: the log of %s has root %s at size %d, but the checkpoint seen before had %s: its history was rewritten", old.Origin, cur.Tree.Hash, cur.Tree.N, old.Tree.Hash)
		}
		return nil
	}
	if err := tlog.CheckTree(proof, cur.Tree.N, cur.Tree.Hash, old.Tree.N, old.Tree.Hash); err != nil {
		return fmt.Errorf("FORKED HISTORY: the log of %s at size %d does not extend the checkpoint seen before at size %d (%v): its history was rewritten", old.Origin, cur.Tree.N, old.Tree.N, err)
	}
	return nil
}
