//go:build race

package race

// Enabled reports whether this binary was built with -race, which sets the race build tag.
const Enabled = true
