package testenv

import "testing"

// StateDir gives the serves of the test (in-process, or processes it
// starts, which inherit the environment) a state directory of their own:
// STATE_DIRECTORY, where serve writes its history snapshot when no file is
// named (config.DefaultSnapshotFile). Without it they would share the
// user's ~/.local/state/kvwatch, and one test's history would be restored
// into the next one's serve. It returns the directory. Like t.Setenv, it
// cannot be used in parallel tests.
func StateDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	t.Setenv("STATE_DIRECTORY", d)
	return d
}
