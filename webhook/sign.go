// Package webhook delivers the events of ladder's outbox (DESIGN.md §8a)
// to the endpoints a workspace declares: webhooks signed as the Standard
// Webhooks spec says, and Slack. A Dispatcher runs in every replica; the
// store hands each delivery to one of them at a time, so each event
// reaches each endpoint at least once, with a stable id to drop repeats.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts a Standard Webhooks secret: whsec_ then base64.
const SecretPrefix = "whsec_"

// ParseSecret decodes a whsec_ secret into its key bytes.
func ParseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), SecretPrefix)
	if !ok {
		return nil, errors.New("the secret does not start with whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("the secret after whsec_ is not base64: %w", err)
	}
	if len(key) < 24 {
		return nil, fmt.Errorf("the secret is %d bytes; use at least 24 (32 random bytes, base64)", len(key))
	}
	return key, nil
}

// Sign returns the webhook-signature header of a message: one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per key, separated by
// spaces. Signing with the new and the old key while a secret rotates
// lets receivers that know either verify.
func Sign(keys [][]byte, id string, ts time.Time, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(mac(k, id, ts.Unix(), body))
	}
	return strings.Join(sigs, " ")
}

func mac(key []byte, id string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
	h.Write(body)
	return h.Sum(nil)
}

// Tolerance is how far a message's timestamp may be from the receiver's
// clock, as the spec recommends.
const Tolerance = 5 * time.Minute

// Verify checks a message as a receiver does: the timestamp within
// Tolerance of now and one of the signatures made with key.
func Verify(key []byte, id, timestamp, signature string, body []byte, now time.Time) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return errors.New("webhook-timestamp is not a number")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > Tolerance || d < -Tolerance {
		return errors.New("webhook-timestamp is too far from now")
	}
	want := mac(key, id, ts, body)
	for _, s := range strings.Fields(signature) {
		v, sig, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no webhook-signature matches")
}
