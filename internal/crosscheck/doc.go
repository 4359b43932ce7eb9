// Package crosscheck holds tests that read the simulator's endpoints with
// kvwatch's scraper and adapters and compare the result with the
// simulator's ground truth. The simulator writes its pages with its own code
// and kvwatch reads them with its own, so each catches the other's mistakes.
// The package has no code of its own.
package crosscheck
