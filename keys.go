package ladder

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
)

// keyEncoding spells key parts in lower-case base32 so a key survives
// copy-paste, shells and URLs without quoting.
var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewKeyToken returns a fresh key id and its bearer token
// "ldr_<id>_<secret>" with a 128-bit random secret, and the SHA-256 of the
// secret, which is all that is stored.
func NewKeyToken() (id, token string, secretHash []byte) {
	var idb [8]byte
	var secret [16]byte
	_, _ = rand.Read(idb[:])
	_, _ = rand.Read(secret[:])
	id = keyEncoding.EncodeToString(idb[:])
	s := keyEncoding.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(s))
	return id, "ldr_" + id + "_" + s, sum[:]
}

// ErrMalformedKey is returned by ParseKeyToken for a token that is not of
// the form ldr_<id>_<secret>.
var ErrMalformedKey = errors.New("key is not of the form ldr_<id>_<secret>")

// ParseKeyToken splits a bearer token into its id and the SHA-256 of its
// secret.
func ParseKeyToken(token string) (id string, secretHash []byte, err error) {
	rest, ok := strings.CutPrefix(token, "ldr_")
	if !ok {
		return "", nil, ErrMalformedKey
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || id == "" || len(secret) < 16 || len(id) > 64 || len(secret) > 128 {
		return "", nil, ErrMalformedKey
	}
	sum := sum256([]byte(secret))
	return id, sum[:], nil
}

// SecretMatches compares a presented secret's hash with the stored one in
// constant time.
func (k Key) SecretMatches(secretHash []byte) bool {
	return len(k.SecretHash) == len(secretHash) && subtle.ConstantTimeCompare(k.SecretHash, secretHash) == 1
}

// KeyID returns the id part of a token, or "" when it is malformed. Logs use
// it to name a key without its secret.
func KeyID(token string) string {
	id, _, err := ParseKeyToken(token)
	if err != nil {
		return ""
	}
	return id
}

// CheckKeyKind is the one key-kind check of every surface (REST routes,
// /mcp, console sign-in): nil when p's key is of one of the allowed kinds,
// and otherwise the refusal that names the kind sent — HUMAN_KEY_REFUSED
// for a human key, AGENT_KEY_REFUSED for an agent key, KEY_KIND_REFUSED for
// any other — so the caller knows which key to use instead. A surface may
// reword the message and hint for its readers; the decision is this one.
func CheckKeyKind(p Principal, allowed ...KeyKind) *Error {
	for _, k := range allowed {
		if p.Kind == k {
			return nil
		}
	}
	want := make([]string, len(allowed))
	for i, k := range allowed {
		want[i] = string(k)
	}
	hint := "no key kind may do this"
	if len(want) > 0 {
		hint = fmt.Sprintf("use %s %s key of this workspace", article(want[0]), strings.Join(want, " or "))
	}
	switch p.Kind {
	case KeyHuman:
		return Refused(CodeHumanKeyRefused, "A human key cannot be used here.", hint)
	case KeyAgent:
		return Refused(CodeAgentKeyRefused, "An agent key cannot be used here.", hint)
	}
	return Refused(CodeKeyKindRefused, fmt.Sprintf("This %s key cannot be used here.", p.Kind), hint)
}

// article is the indefinite article before word: "an agent key", "a human
// key", "an admin key".
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// BearerToken reads an Authorization header: the key after "Bearer ", or ""
// when no header was sent. A header without the Bearer scheme (the key
// alone, say) is refused with KEY_MISSING saying so, rather than as if no
// key had been sent at all.
func BearerToken(header string) (string, *Error) {
	if len(header) > 7 && strings.EqualFold(header[:7], "bearer ") {
		return strings.TrimSpace(header[7:]), nil
	}
	if strings.TrimSpace(header) == "" {
		return "", nil
	}
	return "", &Error{Code: CodeKeyMissing, Message: "The Authorization header has no Bearer scheme, so no key was read.",
		Hint: "put the word Bearer before the key: Authorization: Bearer ldr_<id>_<secret>"}
}

// KeyPage is one page of keys, oldest first (GET /v1/keys).
type KeyPage struct {
	Keys       []Key  `json:"keys"`
	NextCursor string `json:"next_cursor,omitempty"`
}
