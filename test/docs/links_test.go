// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package docs_test

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// repoURL is where the repository is published. Alerts and the dashboard
// link into it, at a file on main and a heading there.
const repoURL = "https://github.com/plegkit/pleg"

// TestDocLinks checks every relative link of the project's Markdown: the
// file it names exists, and a #fragment names a heading of that file.
func TestDocLinks(t *testing.T) {
	atRoot(t)
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{"README.md", "CONTRIBUTING.md", "SECURITY.md"}, docs...)
	for _, file := range files {
		md, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(md)) {
			if err := checkRelativeLink(file, l.target); err != nil {
				t.Errorf("%s:%d: link %q: %v", file, l.line, l.target, err)
			}
		}
	}
}

// TestRunbookURLs checks that every link into this repository from the
// alerts and the dashboard, as shipped in deploy/ and in the chart, names
// a file on main and a heading of it that exist: an operator paged at
// night follows that link.
func TestRunbookURLs(t *testing.T) {
	atRoot(t)
	files := []string{
		"deploy/prometheus/prometheus-rules.yaml", "deploy/prometheus/prometheus-rules.test.yaml",
		"deploy/grafana/pleg-dashboard.json", "charts/pleg/dashboards/pleg.json",
	}
	url := regexp.MustCompile(regexp.QuoteMeta(repoURL) + `[^\s"'<>)]*`)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, u := range url.FindAllString(line, -1) {
				u = strings.TrimRight(u, ".,;:") // the sentence's, not the URL's
				if err := checkRepoURL(u); err != nil {
					t.Errorf("%s:%d: %v", file, i+1, err)
				}
			}
		}
		if file == "deploy/prometheus/prometheus-rules.yaml" && !strings.Contains(string(data), repoURL+"/blob/main/docs/runbook.md#") {
			t.Errorf("%s: no runbook_url into docs/runbook.md", file)
		}
	}
}

// checkRepoURL resolves an absolute link into this repository:
// repoURL/blob/main/PATH#heading or repoURL/tree/main/DIR.
func checkRepoURL(u string) error {
	rest := strings.TrimPrefix(u, repoURL)
	if rest == "" || rest == "/" {
		return nil
	}
	page, fragment, _ := strings.Cut(rest, "#")
	if page == "" || page == "/" {
		return checkFile("README.md", fragment)
	}
	parts := strings.SplitN(strings.TrimPrefix(page, "/"), "/", 3)
	if len(parts) != 3 || parts[0] != "blob" && parts[0] != "tree" || parts[1] != "main" {
		return fmt.Errorf("%q: want %s/blob/main/PATH#heading", u, repoURL)
	}
	if err := checkFile(parts[2], fragment); err != nil {
		return fmt.Errorf("%q: %w", u, err)
	}
	return nil
}

// checkRelativeLink resolves target as GitHub does from the Markdown file
// that holds it. Links with a scheme (https:, mailto:) are not relative.
func checkRelativeLink(from, target string) error {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return nil
	}
	page, fragment, _ := strings.Cut(target, "#")
	file := from
	if page != "" {
		if strings.HasPrefix(page, "/") {
			return fmt.Errorf("absolute path: GitHub resolves it from the site's root, not the repository's")
		}
		file = path.Join(path.Dir(from), page)
	}
	return checkFile(file, fragment)
}

// checkFile checks that file exists in the repository (the test runs at
// its root, see atRoot) and that fragment, if any, is a heading of it. A
// fragment of a directory is its README's.
func checkFile(file, fragment string) error {
	file = path.Clean(file)
	if file == ".." || strings.HasPrefix(file, "../") {
		return fmt.Errorf("%s is outside the repository", file)
	}
	info, err := os.Stat(filepath.FromSlash(file))
	if err != nil {
		return fmt.Errorf("no file %s", file)
	}
	if fragment == "" {
		return nil
	}
	if info.IsDir() {
		file = path.Join(file, "README.md")
	}
	if !strings.HasSuffix(file, ".md") {
		if lineFragment.MatchString(fragment) {
			return nil // a line of a source file
		}
		return fmt.Errorf("#%s: %s is not Markdown, it has no headings", fragment, file)
	}
	md, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		return err
	}
	anchors := headingAnchors(string(md))
	if !slices.Contains(anchors, fragment) {
		return fmt.Errorf("%s has no heading #%s (it has %s)", file, fragment, strings.Join(anchors, ", "))
	}
	return nil
}

// link is a link's target and the line it is on.
type link struct {
	target string
	line   int
}

var (
	// inlineLink is [text](target) or [text](target "title"); an image
	// link ![alt](target) too.
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^\s)>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// referenceLink is a link reference definition: [label]: target.
	referenceLink = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	// codeSpan is inline code, whose brackets are no link.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// scheme starts an absolute URL: https:, mailto:.
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// lineFragment is GitHub's anchor of a line, or lines, of a file.
	lineFragment = regexp.MustCompile(`^L\d+(-L\d+)?$`)
	// explicit is an HTML anchor in Markdown: <a id="..."> or <a name="...">.
	explicit = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// headingLink is a link in a heading, whose anchor keeps its text.
	headingLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// markdownLinks finds the link targets of a Markdown text, outside fenced
// code blocks and code spans.
func markdownLinks(md string) []link {
	var links []link
	fenced := false
	for i, line := range strings.Split(md, "\n") {
		if isFence(line) {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "code")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			links = append(links, link{target: m[1], line: i + 1})
		}
		if m := referenceLink.FindStringSubmatch(line); m != nil {
			links = append(links, link{target: m[1], line: i + 1})
		}
	}
	return links
}

// isFence tells a line that opens or closes a fenced code block.
func isFence(line string) bool {
	trimmed := strings.TrimLeft(line, " ")
	return len(line)-len(trimmed) < 4 && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"))
}

// headingAnchors are the anchors GitHub gives the ATX headings of a
// Markdown text and its explicit <a id> or <a name> anchors. A heading's
// anchor is its text in lower case, links and code marks reduced to their
// text, spaces made hyphens, punctuation other than '-' and '_' dropped;
// a repeated anchor gets -1, -2 and so on.
func headingAnchors(md string) []string {
	var anchors []string
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if isFence(line) {
			fenced = !fenced
		}
		if fenced {
			continue
		}
		for _, m := range explicit.FindAllStringSubmatch(line, -1) {
			anchors = append(anchors, m[1])
		}
		text, ok := headingText(line)
		if !ok {
			continue
		}
		anchor := slug(headingLink.ReplaceAllString(text, "$1"))
		if n := seen[anchor]; n > 0 {
			seen[anchor]++
			anchor = fmt.Sprintf("%s-%d", anchor, n)
		} else {
			seen[anchor] = 1
		}
		anchors = append(anchors, anchor)
	}
	return anchors
}

// headingText is the text of an ATX heading line (# to ######, then a
// space), without its closing #s.
func headingText(line string) (string, bool) {
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 {
		return "", false
	}
	text := strings.TrimLeft(trimmed, "#")
	level := len(trimmed) - len(text)
	if level == 0 || level > 6 || text != "" && text[0] != ' ' && text[0] != '\t' {
		return "", false
	}
	text = strings.TrimSpace(text)
	if closing := strings.TrimRight(text, "#"); closing == "" || strings.HasSuffix(closing, " ") {
		text = strings.TrimSpace(closing)
	}
	return text, true
}

// slug is GitHub's anchor of a heading's text.
func slug(text string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == ' ':
			return '-'
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			return unicode.ToLower(r)
		}
		return -1
	}, strings.TrimSpace(text))
}

// TestHeadingAnchors pins the anchor rules the link checks rely on.
func TestHeadingAnchors(t *testing.T) {
	md := strings.Join([]string{
		"# pleg",
		"## Restarts: nothing lost, nothing repeated",
		"### `pleg run`",
		"## In the cluster: a node condition and events",
		"## Runbook: PLEG is not healthy ##",
		"## Where it goes past the [kubelet](https://kubernetes.io)",
		"## snake_case and CamelCase",
		"## pleg",
		"```sh",
		"# not a heading",
		"```",
		"#not-a-heading-either",
		`<a id="explicit"></a>`,
	}, "\n")
	want := []string{
		"pleg", "restarts-nothing-lost-nothing-repeated", "pleg-run",
		"in-the-cluster-a-node-condition-and-events", "runbook-pleg-is-not-healthy",
		"where-it-goes-past-the-kubelet", "snake_case-and-camelcase", "pleg-1", "explicit",
	}
	if got := headingAnchors(md); !slices.Equal(got, want) {
		t.Errorf("headingAnchors:\n got %q\nwant %q", got, want)
	}
}

// TestMarkdownLinks pins what counts as a link: inline and reference
// links, not code.
func TestMarkdownLinks(t *testing.T) {
	md := strings.Join([]string{
		"See [the CLI](docs/cli.md#pleg-run) and [top](#pleg).",
		"Not `[code](nowhere.md)`.",
		"```",
		"[fenced](nowhere.md)",
		"```",
		"[ref]: docs/api.md",
		"![image](docs/img.png \"title\")",
	}, "\n")
	var got []string
	for _, l := range markdownLinks(md) {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.target))
	}
	want := []string{"1:docs/cli.md#pleg-run", "1:#pleg", "6:docs/api.md", "7:docs/img.png"}
	if !slices.Equal(got, want) {
		t.Errorf("markdownLinks:\n got %q\nwant %q", got, want)
	}
}
