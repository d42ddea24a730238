package cluster

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/memberlist"
)

// LoadKeyring reads a gossip keyring file: one base64 key per line (16, 24
// or 32 bytes: AES-128/192/256), the first being the primary key that
// encrypts; every key decrypts, so keys can be rotated by adding the new
// one second, then moving it first, then removing the old one. Blank lines
// and lines starting with # are skipped. Errors name the file and line.
// Both coordinators and agents load it (the pool is one memberlist).
func LoadKeyring(path string) (*memberlist.Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading gossip keyring: %w", err)
	}
	keys, err := ParseKeyring(path, b)
	if err != nil {
		return nil, err
	}
	kr, err := memberlist.NewKeyring(keys[1:], keys[0])
	if err != nil {
		return nil, fmt.Errorf("gossip keyring %s: %w", path, err)
	}
	return kr, nil
}

// ParseKeyring decodes the keys of a keyring file's content (name is used
// in errors only). The primary key comes first.
func ParseKeyring(name string, content []byte) ([][]byte, error) {
	var keys [][]byte
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(content))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("gossip keyring %s line %d: not base64: %v", name, line, err)
		}
		switch len(k) {
		case 16, 24, 32:
		default:
			return nil, fmt.Errorf("gossip keyring %s line %d: key is %d bytes, want 16, 24 or 32", name, line, len(k))
		}
		if first, dup := seen[string(k)]; dup {
			return nil, fmt.Errorf("gossip keyring %s line %d: same key as line %d", name, line, first)
		}
		seen[string(k)] = line
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading gossip keyring %s: %w", name, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("gossip keyring %s: no key (want one base64 key per line, the primary first)", name)
	}
	return keys, nil
}
