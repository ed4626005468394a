// Package readme holds tests that the README's claims about the code's layout stay true: that
// the table of the article's ideas names files and identifiers that exist, so that a reader who
// knows the article finds each idea in one hop, and that no shipped command links the harness.
package readme
