package image

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"runtime/debug"
	"strings"
	"time"
)

// SBOMMediaType is the SPDX 2.3 JSON media type, the SBOM artifacts'
// artifactType and layer media type.
const SBOMMediaType = "application/spdx+json"

// spdxDocument is the subset of SPDX 2.3 (JSON) the SBOM uses: one package
// for the binary, one for the Go standard library and one per module
// linked in, as `go version -m` lists them.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string            `json:"name"`
	SPDXID           string            `json:"SPDXID"`
	VersionInfo      string            `json:"versionInfo,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	PrimaryPurpose   string            `json:"primaryPurpose,omitempty"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
	Comment          string            `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// SBOMInput describes the binary an SBOM is about.
type SBOMInput struct {
	// Binary is the executable's content; its build information (the
	// module list `go version -m` prints) is read from it.
	Binary []byte
	// Name of the document's subject, e.g. "joiner"; Version its version
	// (the main module's when empty).
	Name, Version string
	// Platform names it, e.g. "linux/arm64".
	Platform string
	// Created is the document's creation time (SOURCE_DATE_EPOCH).
	Created time.Time
}

// SBOM renders an SPDX 2.3 JSON document for a Go binary: the modules it
// was built from, with package URLs (pkg:golang/...), and its SHA-256.
func SBOM(in SBOMInput) ([]byte, error) {
	bi, err := buildinfo.Read(bytes.NewReader(in.Binary))
	if err != nil {
		return nil, fmt.Errorf("reading the Go build information of %s (%s): %w", in.Name, in.Platform, err)
	}
	sum := sha256.Sum256(in.Binary)
	version := in.Version
	if version == "" {
		version = bi.Main.Version
	}
	main := spdxPackage{
		Name: bi.Main.Path, SPDXID: "SPDXRef-Package-main", VersionInfo: version, DownloadLocation: "NOASSERTION",
		PrimaryPurpose: "APPLICATION",
		Checksums:      []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: hex.EncodeToString(sum[:])}},
		ExternalRefs:   []spdxExternalRef{purl(bi.Main.Path, version)},
		Comment:        fmt.Sprintf("%s for %s, built with %s (%s)", BinaryPath, in.Platform, bi.GoVersion, settings(bi.Settings)),
	}
	if bi.Main.Path == "" {
		main.Name = in.Name
	}
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name: fmt.Sprintf("%s-%s-%s", in.Name, version, strings.ReplaceAll(in.Platform, "/", "-")),
		// Unique per binary (its digest), stable across rebuilds.
		DocumentNamespace: fmt.Sprintf("https://github.com/joiner-dev/joiner/spdx/%s/%s/%s", url.PathEscape(in.Name),
			url.PathEscape(version), hex.EncodeToString(sum[:])),
		CreationInfo: spdxCreationInfo{Created: in.Created.UTC().Format(time.RFC3339), Creators: []string{"Tool: joiner-mkimage"}},
		Packages:     []spdxPackage{main},
		Relationships: []spdxRelationship{
			{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: main.SPDXID},
		},
	}
	std := spdxPackage{Name: "stdlib", SPDXID: "SPDXRef-Package-stdlib", VersionInfo: bi.GoVersion, DownloadLocation: "https://go.dev/dl/",
		ExternalRefs: []spdxExternalRef{purl("stdlib", bi.GoVersion)}}
	doc.Packages = append(doc.Packages, std)
	doc.Relationships = append(doc.Relationships, spdxRelationship{Element: main.SPDXID, Type: "DEPENDS_ON", Related: std.SPDXID})
	for i, m := range bi.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		p := spdxPackage{Name: m.Path, SPDXID: fmt.Sprintf("SPDXRef-Package-%d-%s", i, spdxIDChars.ReplaceAllString(m.Path, "-")),
			VersionInfo: m.Version, DownloadLocation: "NOASSERTION", ExternalRefs: []spdxExternalRef{purl(m.Path, m.Version)}}
		if m.Version == "" || strings.HasPrefix(m.Path, ".") || strings.HasPrefix(m.Path, "/") {
			p.ExternalRefs = nil // a local replacement has no package URL
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{Element: main.SPDXID, Type: "DEPENDS_ON", Related: p.SPDXID})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the SBOM: %w", err)
	}
	return append(out, '\n'), nil
}

// spdxIDChars are the characters an SPDX identifier may not hold.
var spdxIDChars = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// purl is a Go module's package URL.
func purl(path, version string) spdxExternalRef {
	loc := "pkg:golang/" + path
	if version != "" {
		loc += "@" + url.PathEscape(version)
	}
	return spdxExternalRef{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: loc}
}

// settings lists the build settings that tell how the binary was built.
func settings(ss []debug.BuildSetting) string {
	var out []string
	for _, s := range ss {
		switch s.Key {
		case "GOOS", "GOARCH", "GOAMD64", "GOARM64", "CGO_ENABLED", "-trimpath", "-tags", "vcs.revision":
			out = append(out, s.Key+"="+s.Value)
		}
	}
	return strings.Join(out, " ")
}
