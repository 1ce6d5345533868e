package crypt

import (
	"bytes"
	"errors"
	"testing"

	"filippo.io/age"
)

func newRecovery(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func seal(t *testing.T, key FolderKey, pw string, recovery ...*age.X25519Recipient) []byte {
	t.Helper()
	env, err := sealEnvelope(key, []byte(pw), testLogN, recovery)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestEnvelopePassword(t *testing.T) {
	key := fixedFolderKey()
	env := seal(t, key, "correct horse")
	got, err := openEnvelope(env, []byte("correct horse"), testMaxLogN)
	if err != nil || got != key {
		t.Fatalf("open = %x, %v", got, err)
	}
	// The production opener accepts the test work factor.
	if got, err := OpenEnvelope(env, []byte("correct horse")); err != nil || got != key {
		t.Fatalf("OpenEnvelope = %x, %v", got, err)
	}
	for _, pw := range []string{"correct hors", "correct horse ", "Correct horse"} {
		_, err := openEnvelope(env, []byte(pw), testMaxLogN)
		if !errors.Is(err, ErrWrongPassword) || errors.Is(err, ErrEnvelope) {
			t.Fatalf("password %q: err = %v, want ErrWrongPassword", pw, err)
		}
	}
	if _, err := OpenEnvelope(env, nil); !errors.Is(err, ErrWrongPassword) || !errors.Is(err, ErrEmptyPassword) {
		t.Fatalf("empty password: err = %v", err)
	}
	if _, err := SealEnvelope(key, nil); !errors.Is(err, ErrEmptyPassword) {
		t.Fatalf("sealing with empty password: err = %v", err)
	}
	if bytes.Equal(env, seal(t, key, "correct horse")) {
		t.Fatal("envelopes are not randomised")
	}
	if _, err := OpenEnvelopeWithIdentity(env, newRecovery(t)); !errors.Is(err, ErrEnvelope) {
		t.Fatalf("identity on an envelope without recovery: err = %v", err)
	}
}

func TestEnvelopeRecovery(t *testing.T) {
	key := fixedFolderKey()
	r1, r2, stranger := newRecovery(t), newRecovery(t), newRecovery(t)
	env := seal(t, key, "pw", r1.Recipient(), r2.Recipient())
	for _, id := range []*age.X25519Identity{r1, r2} {
		if got, err := OpenEnvelopeWithIdentity(env, id); err != nil || got != key {
			t.Fatalf("recovery open = %x, %v", got, err)
		}
	}
	if _, err := OpenEnvelopeWithIdentity(env, nil); !errors.Is(err, ErrEnvelope) {
		t.Fatalf("nil identity: err = %v, want ErrEnvelope", err)
	}
	if _, err := OpenEnvelopeWithIdentity(env, stranger); !errors.Is(err, ErrEnvelope) {
		t.Fatalf("stranger: err = %v, want ErrEnvelope", err)
	}
	if got, err := openEnvelope(env, []byte("pw"), testMaxLogN); err != nil || got != key {
		t.Fatalf("password open = %x, %v", got, err)
	}
	if _, err := sealEnvelope(key, []byte("pw"), testLogN, []*age.X25519Recipient{nil}); err == nil {
		t.Fatal("nil recovery recipient accepted")
	}
}

func TestRewrapEnvelope(t *testing.T) {
	key := fixedFolderKey()
	rec := newRecovery(t)
	env := seal(t, key, "old", rec.Recipient())

	plain, err := rewrapEnvelope(env, []byte("old"), []byte("new"), testMaxLogN, testLogN, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := openEnvelope(plain, []byte("new"), testMaxLogN); err != nil || got != key {
		t.Fatalf("new password: %x, %v", got, err)
	}
	if _, err := openEnvelope(plain, []byte("old"), testMaxLogN); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("old password on rewrapped: err = %v", err)
	}
	if _, err := OpenEnvelopeWithIdentity(plain, rec); !errors.Is(err, ErrEnvelope) {
		t.Fatalf("recovery not passed again still opens: err = %v", err)
	}
	kept, err := rewrapEnvelope(env, []byte("old"), []byte("new"), testMaxLogN, testLogN, []*age.X25519Recipient{rec.Recipient()})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenEnvelopeWithIdentity(kept, rec); err != nil || got != key {
		t.Fatalf("recovery passed again: %x, %v", got, err)
	}
	if _, err := rewrapEnvelope(env, []byte("wrong"), []byte("new"), testMaxLogN, testLogN, nil); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("wrong old password: err = %v", err)
	}
	if _, err := RewrapEnvelope(env, []byte("old"), nil); !errors.Is(err, ErrEmptyPassword) {
		t.Fatalf("empty new password: err = %v", err)
	}
}

func TestEnvelopeWorkFactorCap(t *testing.T) {
	env := seal(t, fixedFolderKey(), "pw")
	if _, err := openEnvelope(env, []byte("pw"), testLogN-1); !errors.Is(err, ErrEnvelope) {
		t.Fatalf("work factor above the cap: err = %v, want ErrEnvelope", err)
	}
	if _, err := openEnvelope(env, []byte("pw"), testLogN); err != nil {
		t.Fatalf("work factor at the cap: %v", err)
	}
}

// TestSealEnvelopeProduction seals with the production work factor once
// (opening it would cost as much again; openEnvelope's cap is tested above).
func TestSealEnvelopeProduction(t *testing.T) {
	if testing.Short() {
		t.Skip("scrypt at 2^18 takes about a second")
	}
	env, err := SealEnvelope(fixedFolderKey(), []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := parseEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(e.password, []byte("\n-> scrypt ")) || !bytes.Contains(e.password, []byte(" 18\n")) {
		t.Fatalf("password part is not scrypt with work factor 18:\n%q", e.password)
	}
	if _, err := openEnvelope(env, []byte("pw"), scryptLogN-1); !errors.Is(err, ErrEnvelope) {
		t.Fatalf("work factor 18 under a cap of 17: err = %v, want ErrEnvelope", err)
	}
}

// TestEnvelopeDamage flips every byte of an envelope: it never opens, and
// the error is ErrEnvelope or (for the scrypt stanza) ErrWrongPassword.
func TestEnvelopeDamage(t *testing.T) {
	env := seal(t, fixedFolderKey(), "pw")
	for i := range env {
		b := bytes.Clone(env)
		b[i] ^= 0x20
		_, err := openEnvelope(b, []byte("pw"), testMaxLogN)
		if !errors.Is(err, ErrEnvelope) && !errors.Is(err, ErrWrongPassword) {
			t.Fatalf("byte %d flipped: err = %v", i, err)
		}
	}
	for n := range len(env) {
		if _, err := openEnvelope(env[:n], []byte("pw"), testMaxLogN); !errors.Is(err, ErrEnvelope) && !errors.Is(err, ErrWrongPassword) {
			t.Fatalf("truncated to %d: err = %v", n, err)
		}
	}
}

func TestParseEnvelopeStructure(t *testing.T) {
	rec := newRecovery(t)
	env := seal(t, fixedFolderKey(), "pw", rec.Recipient())
	e, err := parseEnvelope(env)
	if err != nil || e.recovery == nil {
		t.Fatalf("parse: %v", err)
	}
	if out, err := e.marshal(); err != nil || !bytes.Equal(out, env) {
		t.Fatalf("marshal(parse(env)) differs: %v", err)
	}
	part := func(kind byte, data []byte) []byte {
		return append([]byte{kind, byte(len(data) >> 8), byte(len(data))}, data...)
	}
	pw, rc := part('p', e.password), part('r', e.recovery)
	magic := []byte(envelopeMagic)
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	for name, b := range map[string][]byte{
		"no magic":          cat(pw),
		"version 2":         cat([]byte("lockstep-envelope/v2\n"), pw),
		"magic only":        magic,
		"recovery first":    cat(magic, rc, pw),
		"recovery only":     cat(magic, rc),
		"two passwords":     cat(magic, pw, pw),
		"two recoveries":    cat(magic, pw, rc, rc),
		"unknown kind":      cat(magic, pw, part('x', e.recovery)),
		"empty part":        cat(magic, pw, []byte{'r', 0, 0}),
		"trailing byte":     cat(magic, pw, []byte{'r'}),
		"trailing header":   cat(magic, pw, []byte{'r', 0}),
		"length too long":   cat(magic, []byte{'p', 0xff, 0xff}, e.password),
		"truncated payload": cat(magic, pw)[:len(magic)+len(pw)-1],
	} {
		if _, err := parseEnvelope(b); !errors.Is(err, ErrEnvelope) {
			t.Errorf("%s: err = %v, want ErrEnvelope", name, err)
		}
	}
	// A password part that is an age file for X25519 is damage, not a
	// wrong password.
	x, err := ageSeal([]FolderKey{fixedFolderKey()}, rec.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	_, err = openEnvelope(cat(magic, part('p', x)), []byte("pw"), testMaxLogN)
	if !errors.Is(err, ErrEnvelope) || errors.Is(err, ErrWrongPassword) {
		t.Fatalf("X25519 password part: err = %v, want ErrEnvelope", err)
	}
	// A payload that is not a whole number of 32-byte keys is damage.
	sr, err := age.NewScryptRecipient("pw")
	if err != nil {
		t.Fatal(err)
	}
	sr.SetWorkFactor(testLogN)
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, sr)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(make([]byte, 33))
	w.Close()
	if _, err := openEnvelope(cat(magic, part('p', buf.Bytes())), []byte("pw"), testMaxLogN); !errors.Is(err, ErrEnvelope) {
		t.Fatalf("33-byte payload: err = %v, want ErrEnvelope", err)
	}
}
