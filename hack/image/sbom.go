// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/package-url/packageurl-go"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
)

// builtBinary is pleg as built for one platform.
type builtBinary struct {
	platform platform
	path     string
}

// module is a Go module linked into pleg.
type module struct {
	Path, Version, Sum string
	Platforms          []string // those whose binary links it
}

// sbom is the SPDX 2.3 document of the image: the image (its index
// digest), pleg (the main module, stamped with o.Version), the Go
// standard library and every module the binaries link, read from their
// build information, with the go.sum hash as a checksum.
func (o buildOptions) sbom(ref name.Tag, digest v1.Hash, bins []builtBinary) ([]byte, error) {
	linked, err := readModules(bins)
	if err != nil {
		return nil, err
	}
	qualifiers := packageurl.QualifiersFromMap(map[string]string{
		"repository_url": ref.Context().String(),
		"tag":            ref.TagStr(),
	})
	repoName := path.Base(ref.RepositoryStr())
	purl := packageurl.NewPackageURL(packageurl.TypeOCI, "", repoName, digest.String(), qualifiers, "")
	image := pkg("Image", ref.Context().String(), ref.TagStr(), purl.ToString())
	image.PackageChecksums = []common.Checksum{{Algorithm: common.SHA256, Value: digest.Hex}}
	image.PrimaryPackagePurpose = "CONTAINER"
	image.PackageDownloadLocation = ref.Context().String()
	image.PackageLicenseDeclared = "Apache-2.0"
	image.PackageSupplier = &common.Supplier{SupplierType: "Organization", Supplier: "The pleg Authors"}

	main := pkg("Package-pleg", linked.mainPath, o.Version, golangPURL(linked.mainPath, o.Version))
	main.PrimaryPackagePurpose = "APPLICATION"
	main.PackageDownloadLocation = "git+" + projectURL + "@" + o.Revision
	main.PackageLicenseDeclared = "Apache-2.0"
	main.PackageSupplier = image.PackageSupplier
	var platforms []string
	for _, b := range bins {
		platforms = append(platforms, b.platform.String())
	}
	main.PackageComment = "/pleg, built for " + strings.Join(platforms, ", ")

	stdlib := pkg("Package-stdlib", "stdlib", linked.goVersion, golangPURL("stdlib", linked.goVersion))
	stdlib.PackageComment = "the Go standard library and runtime"

	doc := &spdx.Document{
		SPDXVersion:    spdx.Version,
		DataLicense:    spdx.DataLicense,
		SPDXIdentifier: "DOCUMENT",
		DocumentName:   ref.String(),
		// Unique to the image, and the same for every build of it.
		DocumentNamespace: projectURL + "/spdx/" + ref.RepositoryStr() + "/" + digest.String(),
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{
				{CreatorType: "Organization", Creator: "The pleg Authors"},
				{CreatorType: "Tool", Creator: "pleg-hack-image"},
			},
			Created: o.Created.Format(time.RFC3339),
		},
		Packages: []*spdx.Package{image, main, stdlib},
		Relationships: []*spdx.Relationship{
			relationship("DOCUMENT", "DESCRIBES", image),
			relationship(string(image.PackageSPDXIdentifier), "CONTAINS", main),
			relationship(string(main.PackageSPDXIdentifier), "DEPENDS_ON", stdlib),
		},
	}
	for i, m := range linked.modules {
		p := modulePackage(i, m, len(bins))
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, relationship(string(main.PackageSPDXIdentifier), "DEPENDS_ON", p))
	}
	var buf bytes.Buffer
	if err := spdxjson.Write(doc, &buf, spdxjson.Indent("  ")); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// linkedModules is what the binaries' build information says they link.
type linkedModules struct {
	goVersion, mainPath string
	modules             []*module // by path and version
}

func readModules(bins []builtBinary) (linkedModules, error) {
	var l linkedModules
	byKey := map[string]*module{} // path@version
	for _, b := range bins {
		bi, err := buildinfo.ReadFile(b.path)
		if err != nil {
			return l, fmt.Errorf("build information of %s: %w", b.path, err)
		}
		if l.goVersion != "" && bi.GoVersion != l.goVersion {
			return l, fmt.Errorf("the binaries were built by %s and %s", l.goVersion, bi.GoVersion)
		}
		l.goVersion, l.mainPath = bi.GoVersion, bi.Main.Path
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			key := d.Path + "@" + d.Version
			m, ok := byKey[key]
			if !ok {
				m = &module{Path: d.Path, Version: d.Version, Sum: d.Sum}
				byKey[key] = m
				l.modules = append(l.modules, m)
			}
			m.Platforms = append(m.Platforms, b.platform.String())
		}
	}
	slices.SortFunc(l.modules, func(a, b *module) int {
		return strings.Compare(a.Path+"@"+a.Version, b.Path+"@"+b.Version)
	})
	return l, nil
}

// pkg is an SPDX package that asserts nothing of its licenses and files.
func pkg(id, name, version, purl string) *spdx.Package {
	const noAssertion = "NOASSERTION"
	p := &spdx.Package{
		PackageName:               name,
		PackageSPDXIdentifier:     common.ElementID(id),
		PackageVersion:            version,
		PackageDownloadLocation:   noAssertion,
		FilesAnalyzed:             false,
		IsFilesAnalyzedTagPresent: true,
		PackageLicenseConcluded:   noAssertion,
		PackageLicenseDeclared:    noAssertion,
		PackageCopyrightText:      noAssertion,
	}
	if purl != "" {
		p.PackageExternalReferences = []*spdx.PackageExternalReference{{
			Category: common.CategoryPackageManager,
			RefType:  common.TypePackageManagerPURL,
			Locator:  purl,
		}}
	}
	return p
}

// modulePackage is the i-th module's package, of the binaries of
// platforms platforms.
func modulePackage(i int, m *module, platforms int) *spdx.Package {
	p := pkg(fmt.Sprintf("Package-go-module-%d", i+1), m.Path, m.Version, golangPURL(m.Path, m.Version))
	var comments []string
	if sum, ok := h1SHA256(m.Sum); ok {
		p.PackageChecksums = []common.Checksum{{Algorithm: common.SHA256, Value: sum}}
		comments = append(comments, "checksum: the module's go.sum hash "+m.Sum+" (SHA-256 of its file list), in hex")
	}
	if len(m.Platforms) < platforms {
		comments = append(comments, "only in the binary for "+strings.Join(m.Platforms, ", "))
	}
	p.PackageComment = strings.Join(comments, "; ")
	return p
}

func relationship(a, rel string, b *spdx.Package) *spdx.Relationship {
	return &spdx.Relationship{
		RefA:         common.MakeDocElementID("", a),
		RefB:         common.MakeDocElementID("", string(b.PackageSPDXIdentifier)),
		Relationship: rel,
	}
}

// golangPURL is the package URL of a Go module.
func golangPURL(modPath, version string) string {
	ns, n := path.Split(modPath)
	return packageurl.NewPackageURL(packageurl.TypeGolang, strings.TrimSuffix(ns, "/"), n, version, nil, "").ToString()
}

// h1SHA256 decodes a go.sum hash "h1:<base64>" (the SHA-256 of the
// module's file list) into hex.
func h1SHA256(sum string) (string, bool) {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 32 {
		return "", false
	}
	return hex.EncodeToString(raw), true
}
