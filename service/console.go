package service

import (
	"crypto/hmac"
	"crypto/sha256"
)

// DerivedSecret returns a secret for another purpose (label) derived from
// the audit sampling secret with HMAC-SHA256, so every replica sharing a
// config derives the same one and the audit secret itself never leaves the
// service. It returns nil when the service has no audit secret.
func (s *Service) DerivedSecret(label string) []byte {
	if len(s.auditSecret) == 0 {
		return nil
	}
	m := hmac.New(sha256.New, s.auditSecret)
	m.Write([]byte("ladder derived secret: " + label))
	return m.Sum(nil)
}
