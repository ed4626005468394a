package readme

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines is how long the README may grow: what a newcomer reads in one sitting. Manuals
// belong in docs/, which the README links to.
const readmeMaxLines = 300

// changelogPhrases narrate history, which git holds: the README and the docs say what is.
var changelogPhrases = []string{
	"earlier version", "earlier release", "older release", "previous version", "previous release",
	"no longer", "used to ", "now defaults", "before this change", "before the fix",
}

// markdownLink finds [text](target) links; the target stops at a space, as a title may follow.
var markdownLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)[^)]*\)`)

// TestReadmeFitsASitting holds the README to a sitting and the docs to the README's map: the
// README is at most readmeMaxLines long and links every page of docs/; no page narrates
// history; and every relative link, in the README or a page, leads to a file that exists and,
// with an anchor, to a heading that page has.
func TestReadmeFitsASitting(t *testing.T) {
	t.Parallel()

	readme := readText(t, filepath.Join(root, "README.md"))
	if n := strings.Count(readme, "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, want at most %d: move the manual to a page under docs/", n, readmeMaxLines)
	}

	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	linked := map[string]bool{}
	for _, target := range linkTargets(readme) {
		path, _, _ := strings.Cut(target, "#")
		linked[filepath.Clean(path)] = true
	}
	for _, page := range pages {
		rel, _ := filepath.Rel(root, page)
		if !linked[rel] {
			t.Errorf("README.md links no %s: link every page of docs/ from the README", rel)
		}
	}

	for _, file := range append([]string{filepath.Join(root, "README.md")}, pages...) {
		rel, _ := filepath.Rel(root, file)
		text := readText(t, file)
		lower := strings.ToLower(text)
		for _, phrase := range changelogPhrases {
			if i := strings.Index(lower, phrase); i >= 0 {
				t.Errorf("%s:%d says %q: state what is, git holds the history", rel, strings.Count(text[:i], "\n")+1, phrase)
			}
		}
		for _, target := range linkTargets(text) {
			if err := checkLink(file, text, target); err != nil {
				t.Errorf("%s: link %s: %v", rel, target, err)
			}
		}
	}
}

// checkLink reports why target, a link in file (whose text is text), leads nowhere; nil when it
// leads somewhere or leaves the repository.
func checkLink(file, text, target string) error {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return nil
	}
	path, anchor, _ := strings.Cut(target, "#")
	dest, destText := file, text
	if path != "" {
		dest = filepath.Join(filepath.Dir(file), path)
		if _, err := os.Stat(dest); err != nil {
			return fmt.Errorf("no such file")
		}
		if anchor == "" || !strings.HasSuffix(dest, ".md") {
			return nil
		}
		b, err := os.ReadFile(dest)
		if err != nil {
			return err
		}
		destText = string(b)
	}
	if anchor != "" && !headingAnchors(destText)[anchor] {
		return fmt.Errorf("no heading whose anchor is #%s", anchor)
	}
	return nil
}

// linkTargets returns the targets of the Markdown links in text outside code blocks.
func linkTargets(text string) []string {
	var targets []string
	for _, line := range proseLines(text) {
		for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
	}
	return targets
}

// headingAnchors returns the anchors that GitHub gives text's headings: lower-cased, with
// everything but letters, digits, spaces, hyphens and underscores dropped, spaces made hyphens,
// and -1, -2, ... after a repeated one.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		trimmed := strings.TrimLeft(line, "#")
		if trimmed == line || !strings.HasPrefix(trimmed, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(trimmed)) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		anchor := b.String()
		if n := seen[anchor]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", anchor, n)] = true
		} else {
			anchors[anchor] = true
		}
		seen[anchor]++
	}
	return anchors
}

// proseLines returns text's lines outside fenced code blocks.
func proseLines(text string) []string {
	var lines []string
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if !inCode {
			lines = append(lines, line)
		}
	}
	return lines
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
