package main

import (
	"regexp"
	"strings"
)

// readme is what the README says of the reading path.
type readme struct {
	// readingOrder holds the files of the reading order's rows, in order.
	readingOrder []string
	// skipFiles and skipFuncs are the files (or folders, ending in "/") and the functions that
	// the section on what to skip on a first read names.
	skipFiles []string
	skipFuncs []string
	// hasSkipSection says whether that section exists.
	hasSkipSection bool
}

var (
	headingPattern  = regexp.MustCompile(`^(#+)\s+(.*?)\s*#*\s*$`)
	codePattern     = regexp.MustCompile("`([^`]+)`")
	linkPattern     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	goFilePattern   = regexp.MustCompile(`^[\w./-]+\.go$`)
	folderPattern   = regexp.MustCompile(`^[\w./-]+/$`)
	funcNamePattern = regexp.MustCompile(`^[a-z][\w/]*\.(?:\(\*?\w+\)\.|\w+\.)?\w+(?:\$[\d$]+)?$`)
)

// parseReadme reads the table under the heading "Reading order" (the files named in each row,
// in backticks or as a link's target) and the section whose heading says to skip on a first
// read (each file, folder or function named in backticks).
func parseReadme(text string) readme {
	var r readme
	section := "" // "order", "skip" or ""
	level := 0    // the current section's heading level
	inTable, tableDone := false, false
	for _, line := range strings.Split(text, "\n") {
		if m := headingPattern.FindStringSubmatch(line); m != nil {
			l, title := len(m[1]), strings.ToLower(m[2])
			switch {
			case title == "reading order":
				section, level, inTable, tableDone = "order", l, false, false
			case strings.Contains(title, "skip on a first read") || strings.Contains(title, "skip on first read"):
				section, level = "skip", l
				r.hasSkipSection = true
			case section != "" && l <= level:
				section = ""
			}
			continue
		}
		switch section {
		case "order":
			row := strings.HasPrefix(strings.TrimSpace(line), "|")
			if !row {
				if inTable {
					tableDone = true
				}
				continue
			}
			if tableDone {
				continue
			}
			inTable = true
			r.readingOrder = appendNew(r.readingOrder, filesIn(line)...)
		case "skip":
			for _, m := range codePattern.FindAllStringSubmatch(line, -1) {
				name := strings.TrimPrefix(m[1], "./")
				switch {
				case goFilePattern.MatchString(name), folderPattern.MatchString(name):
					r.skipFiles = appendNew(r.skipFiles, name)
				case funcNamePattern.MatchString(name):
					r.skipFuncs = appendNew(r.skipFuncs, name)
				}
			}
		}
	}
	return r
}

// filesIn returns the Go files a line names in backticks or as links' targets.
func filesIn(line string) []string {
	var files []string
	for _, p := range []*regexp.Regexp{codePattern, linkPattern} {
		for _, m := range p.FindAllStringSubmatch(line, -1) {
			name := strings.TrimPrefix(m[1], "./")
			if goFilePattern.MatchString(name) {
				files = appendNew(files, name)
			}
		}
	}
	return files
}

// appendNew appends those of items not in list already.
func appendNew(list []string, items ...string) []string {
	for _, it := range items {
		found := false
		for _, l := range list {
			found = found || l == it
		}
		if !found {
			list = append(list, it)
		}
	}
	return list
}

// coverage says how the README covers a file: its place in the reading order (from 1), or
// skipped as a whole.
func (r readme) fileCoverage(file string) (place int, skipped bool) {
	for i, f := range r.readingOrder {
		if f == file {
			return i + 1, false
		}
	}
	for _, f := range r.skipFiles {
		if f == file || (strings.HasSuffix(f, "/") && strings.HasPrefix(file, f)) {
			return 0, true
		}
	}
	return 0, false
}

// funcSkipped reports whether the skip section names the function name (see program.name), or
// the function whose closure it is.
func (r readme) funcSkipped(name string) bool {
	base, _, _ := strings.Cut(name, "$")
	for _, s := range r.skipFuncs {
		if nameKey(s) == nameKey(base) {
			return true
		}
	}
	return false
}
