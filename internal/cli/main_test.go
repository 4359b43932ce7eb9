package cli

import (
	"os"
	"testing"
)

// TestMain runs the tests without $COLUMNS, whatever the shell exports:
// status fits its text to $COLUMNS, and the goldens are written at its
// default width (tests that want another set it).
func TestMain(m *testing.M) {
	os.Unsetenv("COLUMNS")
	os.Exit(m.Run())
}
