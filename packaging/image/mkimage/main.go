// Command mkimage builds Joiner's multi-platform container image without a
// container runtime (`make image`): it cross-compiles the binary for each
// platform (CGO_ENABLED=0, -trimpath), puts it on a FROM-scratch root file
// system (user 65532; no CA bundle unless --ca-file names one: the binary
// carries the Mozilla roots of golang.org/x/crypto/x509roots/fallback),
// attaches an SPDX SBOM per platform and writes an OCI image layout. Timestamps are
// --created (SOURCE_DATE_EPOCH, else the commit time), so a rebuild of the
// same sources gives the same digest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/joiner-dev/joiner/packaging/image"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

type options struct {
	out, pkg, platforms, version, commit, caFile, repository, goTool, created string
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	fs.StringVar(&o.out, "out", "dist/image", "OCI image layout directory to write (replaced when it holds a layout)")
	fs.StringVar(&o.pkg, "package", "./cmd/joiner", "Go package of the binary")
	fs.StringVar(&o.platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch[/variant] list")
	fs.StringVar(&o.version, "version", "dev", "version: -X main.version, the OCI version annotation and the layout's tag")
	fs.StringVar(&o.commit, "commit", "unknown", "commit: -X main.commit and the OCI revision annotation")
	fs.StringVar(&o.caFile, "ca-file", "", "PEM CA bundle to install at "+image.CACertsPath+" in place of the binary's own roots (default none)")
	fs.StringVar(&o.repository, "repository", "ghcr.io/joiner-dev/joiner", "repository the image is meant for (printed reference only)")
	fs.StringVar(&o.goTool, "go", "go", "go command")
	fs.StringVar(&o.created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "creation time, Unix seconds (default $SOURCE_DATE_EPOCH, else the last commit's time)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	created, err := createdAt(ctx, o.created)
	if err != nil {
		return err
	}
	platforms, err := parsePlatforms(o.platforms)
	if err != nil {
		return err
	}
	var ca []byte
	if o.caFile != "" {
		if ca, err = os.ReadFile(o.caFile); err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
		if len(ca) == 0 {
			return fmt.Errorf("--ca-file %s: empty", o.caFile)
		}
	}
	tmp, err := os.MkdirTemp("", "mkimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	opts := image.Options{CACerts: ca, Created: created, Version: o.version, Revision: o.commit, Source: "https://github.com/joiner-dev/joiner"}
	for _, p := range platforms {
		bin, err := o.build(ctx, p, filepath.Join(tmp, strings.ReplaceAll(p.String(), "/", "-")))
		if err != nil {
			return err
		}
		opts.Binaries = append(opts.Binaries, image.Binary{Platform: p, Data: bin})
	}
	img, err := image.Build(opts)
	if err != nil {
		return err
	}
	digest, err := image.WriteLayout(o.out, o.version, img)
	if err != nil {
		return err
	}
	im, err := img.Index.IndexManifest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: OCI image layout, tag %s, created %s\n", o.out, o.version, created.UTC().Format(time.RFC3339))
	fmt.Fprintf(stdout, "  index %s (%s@%s)\n", digest, o.repository, digest)
	for i, m := range im.Manifests {
		fmt.Fprintf(stdout, "  %-14s %s, SBOM %s\n", m.Platform.String(), m.Digest, img.SBOMs[i].Descriptor.Digest)
	}
	fmt.Fprintf(stdout, "chart: --set image.repository=%s --set image.digest=%s\n", o.repository, digest)
	return nil
}

// build cross-compiles the package for p into out and returns the binary.
func (o options) build(ctx context.Context, p v1.Platform, out string) ([]byte, error) {
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s", o.version, o.commit)
	cmd := exec.CommandContext(ctx, o.goTool, "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, o.pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOFLAGS=-mod=readonly")
	if p.Architecture == "arm" && p.Variant != "" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building %s for %s: %w", o.pkg, p, err)
	}
	return os.ReadFile(out)
}

// createdAt parses Unix seconds; empty: the last commit's time.
func createdAt(ctx context.Context, s string) (time.Time, error) {
	if s == "" {
		out, err := exec.CommandContext(ctx, "git", "log", "-1", "--format=%ct").Output()
		if err != nil {
			return time.Time{}, errors.New("--created not set, $SOURCE_DATE_EPOCH empty and no git commit to take the time of")
		}
		s = strings.TrimSpace(string(out))
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("--created %q: want Unix seconds", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// parsePlatforms parses "linux/amd64,linux/arm64"; arm64 gets variant v8,
// as registries and runtimes name it.
func parsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, f := range strings.Split(s, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(f))
		if err != nil || p.OS == "" || p.Architecture == "" {
			return nil, fmt.Errorf("--platforms %q: want os/arch[/variant]", f)
		}
		if p.Architecture == "arm64" && p.Variant == "" {
			p.Variant = "v8"
		}
		out = append(out, *p)
	}
	return out, nil
}
