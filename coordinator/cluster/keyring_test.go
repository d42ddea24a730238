package cluster

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
)

func key(b byte, n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, n)) }

func keyringFile(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keyring")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseKeyring(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lines   []string
		keys    int
		wantErr string
	}{
		{name: "one aes-256 key", lines: []string{key(1, 32)}, keys: 1},
		{name: "rotation with comments", lines: []string{"# primary first", key(1, 16), "", key(2, 24), key(3, 32)}, keys: 3},
		{name: "not base64", lines: []string{key(1, 32), "not base64!"}, wantErr: "line 2: not base64"},
		{name: "wrong size", lines: []string{"# c", key(1, 20)}, wantErr: "line 2: key is 20 bytes, want 16, 24 or 32"},
		{name: "duplicate", lines: []string{key(1, 16), key(1, 16)}, wantErr: "line 2: same key as line 1"},
		{name: "empty", lines: []string{"# nothing"}, wantErr: "no key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := keyringFile(t, tc.lines...)
			kr, err := LoadKeyring(p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), p) {
					t.Fatalf("error %v, want one naming %s and %q", err, p, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(kr.GetKeys()); got != tc.keys {
				t.Fatalf("%d keys, want %d", got, tc.keys)
			}
			var primary []byte
			for _, l := range tc.lines {
				if k, err := base64.StdEncoding.DecodeString(l); err == nil && primary == nil {
					primary = k
				}
			}
			if !bytes.Equal(kr.GetPrimaryKey(), primary) {
				t.Fatal("primary key is not the first line's key")
			}
		})
	}
}

func startKeyed(t *testing.T, name string, kr *memberlist.Keyring) *Discovery {
	t.Helper()
	d, err := StartDiscovery(DiscoveryConfig{Name: name, BindAddr: "127.0.0.1", Keyring: kr},
		Meta{Role: RoleCoordinator, ID: name, RaftAddr: "127.0.0.1:1", Expect: 2}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func mustKeyring(t *testing.T, lines ...string) *memberlist.Keyring {
	t.Helper()
	kr, err := LoadKeyring(keyringFile(t, lines...))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// TestKeyringGatesGossip: members join only when one's primary key is in
// the other's keyring both ways; a keyless member cannot join a keyed pool.
func TestKeyringGatesGossip(t *testing.T) {
	k1, k2 := key(1, 32), key(2, 32)
	for _, tc := range []struct {
		name string
		a, b []string // keyring lines; nil: no encryption
		join bool
	}{
		{name: "same key", a: []string{k1}, b: []string{k1}, join: true},
		{name: "different keys", a: []string{k1}, b: []string{k2}, join: false},
		{name: "rotation: both hold both keys, different primaries", a: []string{k1, k2}, b: []string{k2, k1}, join: true},
		{name: "rotation half done: b's primary unknown to a", a: []string{k1}, b: []string{k2, k1}, join: false},
		{name: "plaintext member against a keyed pool", a: []string{k1}, b: nil, join: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ka, kb *memberlist.Keyring
			if tc.a != nil {
				ka = mustKeyring(t, tc.a...)
			}
			if tc.b != nil {
				kb = mustKeyring(t, tc.b...)
			}
			a := startKeyed(t, "a", ka)
			b := startKeyed(t, "b", kb)
			_, err := b.Join([]string{a.Addr()})
			if tc.join {
				if err != nil {
					t.Fatalf("join: %v", err)
				}
				eventually(t, "both members visible on both sides", func() bool {
					return len(a.Servers()) == 2 && len(b.Servers()) == 2
				})
				return
			}
			if err == nil {
				t.Fatalf("joined a pool with another key (a sees %d, b sees %d)", len(a.Servers()), len(b.Servers()))
			}
			if len(a.Servers()) != 1 || len(b.Servers()) != 1 {
				t.Fatalf("members leaked across keys: a %d, b %d", len(a.Servers()), len(b.Servers()))
			}
		})
	}
}
