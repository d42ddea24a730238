package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/packaging/image"
)

// TestMkimageCrossCompilesReproducibly runs mkimage as `make image` does,
// on a small package instead of joiner: two builds give the same digest,
// the index has linux/amd64 and linux/arm64, and each platform's binary
// is an ELF for that machine, static, with an SBOM listing its module.
// Nothing of the build machine goes in: no CA bundle by default.
func TestMkimageCrossCompilesReproducibly(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles twice")
	}
	var dirs, digests []string
	for range 2 {
		dir := filepath.Join(t.TempDir(), "image")
		var out bytes.Buffer
		args := []string{"--out", dir, "--package", "./testdata/hello", "--version", "v0.0.1-test", "--commit", "abc", "--created", "1767225600"}
		if err := run(context.Background(), args, &out); err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`image\.digest=(sha256:[0-9a-f]{64})`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no digest printed:\n%s", out.String())
		}
		dirs, digests = append(dirs, dir), append(digests, m[1])
	}
	if digests[0] != digests[1] {
		t.Fatalf("two builds of the same sources: %s and %s", digests[0], digests[1])
	}
	l, err := image.ReadLayout(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	if l.IndexDigest.String() != digests[0] || l.Tag != "v0.0.1-test" {
		t.Errorf("layout: index %s tag %q, want %s v0.0.1-test", l.IndexDigest, l.Tag, digests[0])
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var got []string
	for _, p := range l.Platforms {
		got = append(got, p.Platform.String())
		if _, ok := p.Files[image.CACertsPath]; ok {
			t.Errorf("%s: %s in an image built without --ca-file", p.Platform, image.CACertsPath)
		}
		bin := p.Files[image.BinaryPath].Data
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s: %s: %v", p.Platform, image.BinaryPath, err)
		}
		if f.Machine != machines[p.Platform.Architecture] {
			t.Errorf("%s: ELF machine %s", p.Platform, f.Machine)
		}
		if interp := f.Section(".interp"); interp != nil {
			t.Errorf("%s: dynamically linked (has .interp)", p.Platform)
		}
		bi, err := buildinfo.Read(bytes.NewReader(bin))
		if err != nil {
			t.Fatal(err)
		}
		var set []string
		for _, s := range bi.Settings {
			set = append(set, s.Key+"="+s.Value)
		}
		for _, want := range []string{"CGO_ENABLED=0", "-trimpath=true", "GOARCH=" + p.Platform.Architecture} {
			if !strings.Contains(strings.Join(set, " "), want) {
				t.Errorf("%s: build settings %v lack %s", p.Platform, set, want)
			}
		}
		if !bytes.Contains(p.SBOM, []byte("pkg:golang/github.com/spf13/pflag@v")) {
			t.Errorf("%s: SBOM does not list the pflag module:\n%s", p.Platform, p.SBOM)
		}
	}
	if strings.Join(got, " ") != "linux/amd64 linux/arm64/v8" {
		t.Errorf("platforms %v, want linux/amd64 linux/arm64/v8", got)
	}
}

func TestMkimageRefusesAnEmptyCAFile(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "image")
	err := run(context.Background(), []string{"--out", out, "--created", "1767225600", "--ca-file", ca}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--ca-file "+ca+": empty") {
		t.Fatalf("err %v, want the empty --ca-file named", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s written (stat: %v)", out, err)
	}
}
