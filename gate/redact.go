package gate

import "strings"

// Redacted replaces each secret Redact finds.
const Redacted = "[REDACTED]"

// secretKeys are names whose value, after "=" or ":", is a secret.
var secretKeys = []string{
	"password", "passwd", "pwd", "passphrase", "secret", "client_secret",
	"token", "access_token", "refresh_token", "api_key", "apikey", "api-key",
	"access_key", "private_key",
}

// minSecretRun is the length from which an unbroken hex or base64 run counts
// as a secret (a 128-bit key is 32 hex digits).
const minSecretRun = 32

// Redact masks secret-shaped strings in s: ladder keys (ldr_<id>_<secret>),
// "sk-" keys, bearer tokens, password=… and similar name=value or name: value
// pairs, and long hex or base64 runs. Text that may reach a log or a response
// goes through it, because notes and fault messages can quote submitted
// evidence. A label stays ("password=", "Bearer ", "ldr_") so a reader still
// sees what was hidden.
//
// Long runs are masked only when they hold both a digit and a letter, so long
// snake_case field names stay readable.
//
// Redact is a single hand-written pass rather than a regular expression: it
// runs on every decision, and the regexp version alone cost more than the
// rest of authorize.
func Redact(s string) string {
	var b strings.Builder
	last := 0 // s[last:] is not yet copied to b
	replace := func(start, end int, with string) {
		if last == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last:start])
		b.WriteString(with)
		last = end
	}
	for i := 0; i < len(s); {
		if !isWordByte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		word := s[i:j]
		switch {
		case strings.HasPrefix(word, "ldr_") && isLadderKey(word):
			replace(i, i+spanOf(word, isKeyByte), "ldr_"+Redacted)
			i = j
			continue
		case strings.HasPrefix(word, "sk-") && spanOf(word[3:], isKeyByte) >= 8:
			replace(i, i+3+spanOf(word[3:], isKeyByte), "sk-"+Redacted)
			i = j
			continue
		case strings.EqualFold(word, "bearer"):
			k := skipSpaces(s, j)
			if e := k + spanOf(s[k:], isTokenByte); k > j && e > k {
				replace(k, e, Redacted)
				i = e
				continue
			}
		default:
			if k := skipSpaces(s, j); k < len(s) && (s[k] == '=' || s[k] == ':') && isSecretKey(word) {
				k = skipSpaces(s, k+1)
				if e := valueEnd(s, k); e > k {
					replace(k, e, Redacted)
					i = e
					continue
				}
			}
		}
		// Long runs of base64 characters inside the word ('.' and '~'
		// break them, so dotted names and paths are judged piece by piece).
		for p := i; p < j; {
			q := p + spanOf(s[p:j], isBase64Byte)
			if q-p >= minSecretRun && hasDigitAndLetter(s[p:q]) {
				end := q
				for n := 0; n < 2 && end < len(s) && s[end] == '='; n++ {
					end++ // base64 padding
				}
				replace(p, end, Redacted)
			}
			p = q + 1
		}
		i = j
		if last > i {
			i = last
		}
	}
	if last == 0 {
		return s // the common case: nothing to hide, no allocation
	}
	b.WriteString(s[last:])
	return b.String()
}

func isWordByte(c byte) bool {
	return isBase64Byte(c) || c == '.' || c == '~'
}

func isBase64Byte(c byte) bool {
	return isKeyByte(c) || c == '+' || c == '/'
}

func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// isTokenByte is the RFC 6750 b64token alphabet.
func isTokenByte(c byte) bool {
	return isWordByte(c) || c == '='
}

func spanOf(s string, ok func(byte) bool) int {
	n := 0
	for n < len(s) && ok(s[n]) {
		n++
	}
	return n
}

func skipSpaces(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// isLadderKey reports whether word starts with ldr_<id>_<secret>.
func isLadderKey(word string) bool {
	rest := word[4:spanOf(word, isKeyByte)]
	u := strings.IndexByte(rest, '_')
	return u > 0 && u < len(rest)-1
}

func isSecretKey(word string) bool {
	for _, k := range secretKeys {
		if strings.EqualFold(word, k) {
			return true
		}
	}
	return false
}

// valueEnd returns the end of the value starting at s[k]: a quoted string
// with its quotes, or everything up to a space or a separator.
func valueEnd(s string, k int) int {
	if k >= len(s) {
		return k
	}
	if q := s[k]; q == '"' || q == '\'' {
		if e := strings.IndexByte(s[k+1:], q); e >= 0 {
			return k + 1 + e + 1
		}
		return len(s)
	}
	e := k
	for e < len(s) && !strings.ContainsRune(" \t\r\n,;&\"'", rune(s[e])) {
		e++
	}
	return e
}

func hasDigitAndLetter(s string) bool {
	var digit, letter bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letter = true
		}
	}
	return digit && letter
}
