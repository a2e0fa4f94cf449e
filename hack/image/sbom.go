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
	var goVersion, mainPath string
	mods := map[string]*module{} // by path@version
	var order []string
	for _, b := range bins {
		bi, err := buildinfo.ReadFile(b.path)
		if err != nil {
			return nil, fmt.Errorf("build information of %s: %w", b.path, err)
		}
		if goVersion != "" && bi.GoVersion != goVersion {
			return nil, fmt.Errorf("the binaries were built by %s and %s", goVersion, bi.GoVersion)
		}
		goVersion, mainPath = bi.GoVersion, bi.Main.Path
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			key := d.Path + "@" + d.Version
			m, ok := mods[key]
			if !ok {
				m = &module{Path: d.Path, Version: d.Version, Sum: d.Sum}
				mods[key] = m
				order = append(order, key)
			}
			m.Platforms = append(m.Platforms, b.platform.String())
		}
	}
	slices.Sort(order)

	noAssertion := "NOASSERTION"
	pkg := func(id, name, version, purl string) *spdx.Package {
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

	image := pkg("Image", ref.Context().String(), ref.TagStr(),
		packageurl.NewPackageURL(packageurl.TypeOCI, "", path.Base(ref.RepositoryStr()), digest.String(),
			packageurl.QualifiersFromMap(map[string]string{"repository_url": ref.Context().String(), "tag": ref.TagStr()}), "").ToString())
	image.PackageChecksums = []common.Checksum{{Algorithm: common.SHA256, Value: digest.Hex}}
	image.PrimaryPackagePurpose = "CONTAINER"
	image.PackageDownloadLocation = ref.Context().String()
	image.PackageLicenseDeclared = "Apache-2.0"
	image.PackageSupplier = &common.Supplier{SupplierType: "Organization", Supplier: "The pleg Authors"}

	main := pkg("Package-pleg", mainPath, o.Version, golangPURL(mainPath, o.Version))
	main.PrimaryPackagePurpose = "APPLICATION"
	main.PackageDownloadLocation = "git+" + projectURL + "@" + o.Revision
	main.PackageLicenseDeclared = "Apache-2.0"
	main.PackageSupplier = image.PackageSupplier
	var platforms []string
	for _, b := range bins {
		platforms = append(platforms, b.platform.String())
	}
	main.PackageComment = "/pleg, built for " + strings.Join(platforms, ", ")

	stdlib := pkg("Package-stdlib", "stdlib", goVersion, golangPURL("stdlib", goVersion))
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
	for i, key := range order {
		m := mods[key]
		p := pkg(fmt.Sprintf("Package-go-module-%d", i+1), m.Path, m.Version, golangPURL(m.Path, m.Version))
		if sum, ok := h1SHA256(m.Sum); ok {
			p.PackageChecksums = []common.Checksum{{Algorithm: common.SHA256, Value: sum}}
			p.PackageComment = "checksum: the module's go.sum hash " + m.Sum + " (SHA-256 of its file list), in hex"
		}
		if len(m.Platforms) < len(bins) {
			p.PackageComment = strings.TrimPrefix(p.PackageComment+"; only in the binary for "+strings.Join(m.Platforms, ", "), "; ")
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, relationship(string(main.PackageSPDXIdentifier), "DEPENDS_ON", p))
	}
	var buf bytes.Buffer
	if err := spdxjson.Write(doc, &buf, spdxjson.Indent("  ")); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
