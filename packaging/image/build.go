package image

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// OCI annotation keys the image, the index and the layout carry.
const (
	AnnotationCreated  = "org.opencontainers.image.created"
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationTitle    = "org.opencontainers.image.title"
	AnnotationRefName  = "org.opencontainers.image.ref.name"
)

// emptyMediaType is OCI 1.1's empty descriptor, an artifact's config.
const emptyMediaType types.MediaType = "application/vnd.oci.empty.v1+json"

// Binary is one platform's static executable.
type Binary struct {
	Platform v1.Platform
	Data     []byte
}

// Options are everything an image is made of; the same options give the
// same bytes.
type Options struct {
	// Binaries, one per platform, in the index's order.
	Binaries []Binary
	// CACerts, when given, is a PEM bundle installed at CACertsPath. The
	// default image has none: the binary carries the Mozilla roots of
	// golang.org/x/crypto/x509roots/fallback, which Go uses where the
	// system has no roots, so the image is a function of the sources
	// alone. A bundle there (or one mounted, or SSL_CERT_FILE) replaces
	// them.
	CACerts []byte
	// Created stamps files, configs, history and annotations
	// (SOURCE_DATE_EPOCH).
	Created time.Time
	// Version, Revision and Source go into the OCI annotations and labels.
	Version, Revision, Source string
}

// Image is a built multi-platform image: its index and one SBOM artifact
// per platform manifest (an OCI 1.1 referrer: its subject is that manifest).
type Image struct {
	Index v1.ImageIndex
	SBOMs []Artifact
}

// Artifact is an OCI 1.1 artifact manifest and its blobs.
type Artifact struct {
	Descriptor v1.Descriptor
	Manifest   []byte
	Blobs      map[v1.Hash][]byte
}

// Build assembles the image.
func Build(o Options) (Image, error) {
	if len(o.Binaries) == 0 {
		return Image{}, errors.New("no binaries: want one per platform")
	}
	ann := o.annotations()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var out Image
	seen := map[string]bool{}
	for _, b := range o.Binaries {
		p := b.Platform
		if seen[p.String()] {
			return Image{}, fmt.Errorf("platform %s given twice", p)
		}
		seen[p.String()] = true
		img, err := o.platformImage(b, ann)
		if err != nil {
			return Image{}, fmt.Errorf("platform %s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
		sbom, err := o.sbom(b, img)
		if err != nil {
			return Image{}, fmt.Errorf("platform %s: %w", p, err)
		}
		out.SBOMs = append(out.SBOMs, sbom)
	}
	ii, ok := mutate.Annotations(idx, ann).(v1.ImageIndex)
	if !ok {
		return Image{}, errors.New("annotating the index: not an index")
	}
	out.Index = ii
	return out, nil
}

func (o Options) annotations() map[string]string {
	ann := map[string]string{
		AnnotationCreated: o.Created.UTC().Format(time.RFC3339),
		AnnotationTitle:   "joiner",
	}
	for k, v := range map[string]string{AnnotationVersion: o.Version, AnnotationRevision: o.Revision, AnnotationSource: o.Source} {
		if v != "" {
			ann[k] = v
		}
	}
	return ann
}

// platformImage is one platform's image: one layer, non-root, the binary
// as entrypoint.
func (o Options) platformImage(b Binary, ann map[string]string) (v1.Image, error) {
	tb, err := tarFiles(rootFS(b.Data, o.CACerts), o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tb)), nil },
		tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	created := v1.Time{Time: o.Created.UTC()}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: created, CreatedBy: "packaging/image/mkimage", Comment: "joiner " + o.Version + ", FROM scratch"}})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS, cf.Architecture, cf.Variant, cf.OSVersion = b.Platform.OS, b.Platform.Architecture, b.Platform.Variant, b.Platform.OSVersion
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint: []string{BinaryPath},
		Env:        []string{"PATH=/usr/bin"},
		WorkingDir: "/",
		Labels:     ann,
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	out, ok := mutate.Annotations(img, ann).(v1.Image)
	if !ok {
		return nil, errors.New("annotating the image: not an image")
	}
	return out, nil
}

// sbom is the SPDX SBOM of b as an artifact whose subject is img.
func (o Options) sbom(b Binary, img v1.Image) (Artifact, error) {
	doc, err := SBOM(SBOMInput{Binary: b.Data, Name: "joiner", Version: o.Version, Platform: b.Platform.String(), Created: o.Created})
	if err != nil {
		return Artifact{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return Artifact{}, err
	}
	size, err := img.Size()
	if err != nil {
		return Artifact{}, err
	}
	cfg := []byte("{}")
	m := v1.Manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: SBOMMediaType,
		Config: v1.Descriptor{MediaType: emptyMediaType, Digest: hash(cfg), Size: int64(len(cfg)), Data: cfg},
		Layers: []v1.Descriptor{{MediaType: SBOMMediaType, Digest: hash(doc), Size: int64(len(doc)),
			Annotations: map[string]string{AnnotationTitle: "joiner-" + platformSlug(b.Platform) + ".spdx.json"}}},
		Subject:     &v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: d, Size: size},
		Annotations: map[string]string{AnnotationCreated: o.Created.UTC().Format(time.RFC3339)},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return Artifact{}, fmt.Errorf("SBOM manifest: %w", err)
	}
	return Artifact{
		Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: hash(raw), Size: int64(len(raw)), ArtifactType: SBOMMediaType,
			Annotations: map[string]string{AnnotationTitle: "SBOM of joiner " + b.Platform.String()}},
		Manifest: raw,
		Blobs:    map[v1.Hash][]byte{hash(cfg): cfg, hash(doc): doc},
	}, nil
}

func platformSlug(p v1.Platform) string {
	s := p.OS + "-" + p.Architecture
	if p.Variant != "" {
		s += "-" + p.Variant
	}
	return s
}

func hash(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sum[:])}
}

// WriteLayout writes img as an OCI image layout in dir: index.json lists
// the image index (annotated with ref.name tag) and the SBOM artifacts
// beside it, as `oras attach --oci-layout` stores referrers. dir is
// replaced when it holds a layout (or nothing), refused otherwise. It
// returns the index's digest.
func WriteLayout(dir, tag string, img Image) (v1.Hash, error) {
	if err := clearLayout(dir); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("layout %s: %w", dir, err)
	}
	ann := map[string]string{}
	if tag != "" {
		ann[AnnotationRefName] = tag
	}
	if err := p.AppendIndex(img.Index, layout.WithAnnotations(ann)); err != nil {
		return v1.Hash{}, fmt.Errorf("layout %s: writing the index: %w", dir, err)
	}
	for _, a := range img.SBOMs {
		for h, b := range a.Blobs {
			if err := p.WriteBlob(h, io.NopCloser(bytes.NewReader(b))); err != nil {
				return v1.Hash{}, fmt.Errorf("layout %s: blob %s: %w", dir, h, err)
			}
		}
		if err := p.WriteBlob(a.Descriptor.Digest, io.NopCloser(bytes.NewReader(a.Manifest))); err != nil {
			return v1.Hash{}, fmt.Errorf("layout %s: SBOM manifest: %w", dir, err)
		}
		if err := p.AppendDescriptor(a.Descriptor); err != nil {
			return v1.Hash{}, fmt.Errorf("layout %s: SBOM manifest: %w", dir, err)
		}
	}
	d, err := img.Index.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("index digest: %w", err)
	}
	return d, nil
}

// clearLayout removes a previous layout at dir; any other content is left
// alone and refused.
func clearLayout(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("layout %s: %w", dir, err)
	case len(entries) == 0:
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("layout %s: exists and is not an OCI image layout; not overwriting it", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("layout %s: removing the previous layout: %w", dir, err)
	}
	return nil
}
