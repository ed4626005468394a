// Package readme holds tests that the README and the docs stay true and fit their purpose: that
// the table of the article's ideas names files and identifiers that exist, so that a reader who
// knows the article finds each idea in one hop; that no shipped command links the harness; and
// that the README fits a sitting, links every page of docs/, and that neither it nor a page
// narrates history or links to nothing.
package readme
